//! The world's hostpath plugin seen as a storage backend: what its Create calls made under each name (the
//! `creations` of its `state.json`, see hostpath-plugin's `creations` module), and the plugin killed and started
//! again on the same socket and state directory, as a kubelet restarts a crashed driver container.
//!
//! A name made more than once is a duplicated side effect: two backend objects for one claim or snapshot, or one
//! made again after it was deleted.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::worlds::driver::DriverWorld;

/// The kinds of object the plugin counts, as `state.json` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Volumes,
    Snapshots,
    GroupSnapshots,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Volumes => "volumes",
            Kind::Snapshots => "snapshots",
            Kind::GroupSnapshots => "group_snapshots",
        }
    }
}

/// The successful Create calls of one name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateCalls {
    /// When each call that made a new backend object did so.
    pub created: Vec<SystemTime>,
    /// Calls answered with the object that already existed.
    pub existing: u64,
}

#[derive(Deserialize)]
struct Instant {
    seconds: u64,
    nanos: u32,
}

#[derive(Deserialize)]
struct Calls {
    #[serde(default)]
    created: Vec<Instant>,
    #[serde(default)]
    existing: u64,
}

impl DriverWorld {
    /// The plugin's state directory (as `Scenario::hostpath_plugin` names it).
    pub fn plugin_state_dir(&self) -> std::path::PathBuf {
        self.scenario.path("hostpath-plugin-state")
    }

    /// What the plugin's Create calls of `kind` did, by name (empty before the first one).
    pub fn creations(&self, kind: Kind) -> BTreeMap<String, CreateCalls> {
        let path = self.plugin_state_dir().join("state.json");
        let Ok(text) = std::fs::read_to_string(&path) else { return BTreeMap::new() };
        let state: serde_json::Value = serde_json::from_str(&text).expect("state.json is JSON");
        let Some(by_name) = state["creations"].get(kind.key()) else { return BTreeMap::new() };
        let by_name: BTreeMap<String, Calls> = serde_json::from_value(by_name.clone()).expect("creations by name");
        by_name
            .into_iter()
            .map(|(name, calls)| {
                let created = calls
                    .created
                    .iter()
                    .map(|at| UNIX_EPOCH + Duration::from_secs(at.seconds) + Duration::from_nanos(at.nanos.into()))
                    .collect();
                (name, CreateCalls { created, existing: calls.existing })
            })
            .collect()
    }

    /// The names of `kind` under which the plugin made more than one backend object.
    pub fn made_twice(&self, kind: Kind) -> Vec<String> {
        self.creations(kind).into_iter().filter(|(_, calls)| calls.created.len() > 1).map(|(name, _)| name).collect()
    }

    /// kill -9 of the plugin: calls in flight end with the connection, the socket file stays behind.
    pub fn kill_plugin(&mut self) {
        self.plugin.kill9();
    }

    /// Starts the hostpath-plugin again on the same socket and state directory, logging to `<log_name>.log`, with
    /// `plugin_args` after the world's driver name.
    pub fn restart_plugin(&mut self, log_name: &str, plugin_args: &[&str]) {
        let driver_flag = format!("--driver-name={}", self.driver);
        let mut args = vec![driver_flag.as_str()];
        args.extend_from_slice(plugin_args);
        self.plugin = self.scenario.hostpath_plugin_again("hostpath-plugin", log_name, &args);
    }
}
