//! Command-line flags.
//!
//! Flags are long options (`--node-id=n1`), but Go-style single-dash spellings (`-node-id=n1`,
//! `-v=5`) are accepted too, since deployments and scripts written for the upstream Go plugin use them:
//! [`normalize_go_style`] rewrites them before clap sees them. The upstream names `-nodeid`,
//! `-drivername` and `-statedir` are aliases.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;

use crate::mutable::{DEFAULT_ACCEPTED, MutableParameterPolicy};
use crate::plugin::{Config, VolumeHealth};
use csi_client::quantity::parse_bytes;

#[derive(Debug, Clone, Parser)]
// A flag given twice takes its last value, as Go's flag package does: a harness can append `-v=10` to a command line
// that already sets `-v`.
#[command(
    name = "hostpath-plugin",
    version,
    about = "Reference CSI plugin: volumes and snapshots in a directory",
    args_override_self = true
)]
pub struct Flags {
    /// CSI endpoint: unix:///path/to/csi.sock or a bare socket path. A stale socket file is removed.
    #[arg(long, default_value = "unix:///tmp/csi.sock")]
    pub endpoint: String,

    /// Directory for state.json, volumes/ and snapshots/ (created if missing). Needed unless --proxy-endpoint is given.
    #[arg(long, alias = "statedir", required_unless_present = "proxy_endpoint")]
    pub state_dir: Option<PathBuf>,

    /// This node's ID, reported by NodeGetInfo and used as the volumes' topology.
    #[arg(long, alias = "nodeid")]
    pub node_id: String,

    /// Driver name reported by GetPluginInfo.
    #[arg(long, alias = "drivername", default_value = "hostpath.csi.k8s.io")]
    pub driver_name: String,

    /// Largest volume size; larger requests get OUT_OF_RANGE. Accepts sizes like 1Ti, 500Gi, 10G.
    #[arg(long, default_value = "1Ti", value_parser = parse_size_flag)]
    pub max_volume_size: i64,

    /// Total bytes of the simulated pool; GetCapacity reports what volumes have not taken.
    #[arg(long, default_value = "100Gi", value_parser = parse_size_flag)]
    pub capacity: i64,

    /// Comma-separated mutable parameter keys accepted by CreateVolume and ControllerModifyVolume
    /// (iops and throughput values are checked). Empty disables MODIFY_VOLUME.
    #[arg(long, default_value = DEFAULT_ACCEPTED)]
    pub accepted_mutable_parameters: String,

    /// Advertise PUBLISH_UNPUBLISH_VOLUME and answer ControllerPublishVolume/ControllerUnpublishVolume, as a driver
    /// whose CSIDriver says attachRequired: true (the calls check the volume and record nothing).
    #[arg(long)]
    pub attach_required: bool,

    /// Advertise the volume health calls: `get` GET_VOLUME_HEALTH (ControllerGetVolumeHealth), `list` LIST_VOLUME_HEALTH
    /// too (ControllerListVolumeHealth), as a driver a health monitor asks per volume or by listing. `none`: served
    /// but not advertised.
    #[arg(long, value_enum, default_value = "none")]
    pub volume_health: VolumeHealth,

    /// Mount for real on the node: bind mounts for filesystem volumes, loop devices for block volumes, statvfs numbers
    /// for NodeGetVolumeStats. Needs root (CAP_SYS_ADMIN) and /dev. Without it the node service only keeps books.
    #[arg(long)]
    pub node_mounts: bool,

    /// Do not advertise SINGLE_NODE_MULTI_WRITER, and refuse the SINGLE_NODE_SINGLE_WRITER and
    /// SINGLE_NODE_MULTI_WRITER access modes, as a driver that knows only SINGLE_NODE_WRITER does.
    #[arg(long)]
    pub no_single_node_multi_writer: bool,

    /// Refuse block volumes (CreateVolume is INVALID_ARGUMENT, ValidateVolumeCapabilities does not confirm), as a
    /// driver without raw block support.
    #[arg(long)]
    pub no_block: bool,

    /// The state directory is shared with other processes of this plugin (a driver's controller and node pods on one
    /// machine, as upstream's hostpath driver keeps one directory for both): each call holds a file lock on it and
    /// reads state.json again when another process replaced it.
    #[arg(long)]
    pub shared_state: bool,

    /// NodeGetInfo's max_volumes_per_node: the scheduler places no more volumes of this driver on the node (upstream
    /// hostpath's -maxvolumespernode). 0: no limit.
    #[arg(long, alias = "maxvolumespernode", default_value_t = 0)]
    pub max_volumes_per_node: i64,

    /// JSON file of faults to inject, re-read when it changes; a missing file means no faults.
    #[arg(long)]
    pub fault_config: Option<PathBuf>,

    /// Serve no CSI: pair each connection on --endpoint with one on this TCP port (tcp://HOST:PORT, the host may be
    /// empty) and copy bytes both ways, as upstream's hostpathplugin does for Kubernetes' CSI mock tests, whose CSI
    /// driver runs in the e2e.test process and reaches the port through a port-forward.
    #[arg(long)]
    pub proxy_endpoint: Option<String>,

    /// Log verbosity of the plugin, as klog's -v: 0-2 info, 3-4 debug (every request), 5 and above trace.
    /// RUST_LOG overrides it.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,
}

impl Flags {
    pub fn config(&self) -> Config {
        Config {
            driver_name: self.driver_name.clone(),
            node_id: self.node_id.clone(),
            // clap requires it whenever there is no --proxy-endpoint, the only mode that builds a Config.
            state_dir: self.state_dir.clone().unwrap_or_default(),
            max_volume_size: self.max_volume_size,
            capacity: self.capacity,
            mutable_parameters: MutableParameterPolicy::from_flag(&self.accepted_mutable_parameters),
            fault_config: self.fault_config.clone(),
            attach_required: self.attach_required,
            volume_health: self.volume_health,
            node_mounts: self.node_mounts,
            single_node_multi_writer: !self.no_single_node_multi_writer,
            block: !self.no_block,
            shared_state: self.shared_state,
            max_volumes_per_node: self.max_volumes_per_node,
        }
    }

    /// The `tracing` level for `--v`.
    pub fn log_level(&self) -> tracing::Level {
        match self.verbosity {
            0..=2 => tracing::Level::INFO,
            3..=4 => tracing::Level::DEBUG,
            _ => tracing::Level::TRACE,
        }
    }
}

fn parse_size_flag(text: &str) -> Result<i64, String> {
    let bytes = parse_bytes(text).map_err(|e| e.to_string())?;
    if bytes <= 0 {
        return Err("must be greater than zero".to_string());
    }
    Ok(bytes)
}

/// Every long flag name, aliases included, so a Go-style `-name` can be told from anything else.
fn long_names() -> Vec<String> {
    use clap::CommandFactory as _;
    let command = Flags::command();
    let mut names: Vec<String> = vec!["help".into(), "version".into()];
    for arg in command.get_arguments() {
        names.extend(arg.get_long().map(String::from));
        names.extend(arg.get_all_aliases().into_iter().flatten().map(String::from));
    }
    names
}

/// Rewrites Go-style `-name` / `-name=value` into `--name` / `--name=value` when `name` is one of the
/// plugin's long flags. Everything else, including values that start with `-` and all arguments after
/// `--`, is left alone.
pub fn normalize_go_style<I>(args: I) -> Vec<OsString>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let names = long_names();
    let mut out = Vec::new();
    let mut passthrough = false;
    for (index, arg) in args.into_iter().map(Into::into).enumerate() {
        if index == 0 || passthrough {
            out.push(arg);
            continue;
        }
        let rewritten = arg.to_str().and_then(|text| {
            if text == "--" {
                return None;
            }
            let rest = text.strip_prefix('-').filter(|r| !r.starts_with('-'))?;
            let name = rest.split('=').next().unwrap_or_default();
            names.iter().any(|n| n == name).then(|| OsString::from(format!("-{text}")))
        });
        passthrough = arg == "--";
        out.push(rewritten.unwrap_or(arg));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn normalizes_go_style_flags() {
        let cases: &[(&[&str], &[&str])] = &[
            (&["p", "-endpoint=unix:///s", "-node-id", "n1"], &["p", "--endpoint=unix:///s", "--node-id", "n1"]),
            (
                &["p", "-nodeid=n1", "-statedir=/d", "-drivername=x"],
                &["p", "--nodeid=n1", "--statedir=/d", "--drivername=x"],
            ),
            (&["p", "-v=5"], &["p", "--v=5"]),
            (&["p", "-v", "3"], &["p", "--v", "3"]),
            (&["p", "--endpoint=/s", "--v=2"], &["p", "--endpoint=/s", "--v=2"]),
            (&["p", "--node-id", "-weird-node"], &["p", "--node-id", "-weird-node"]),
            (&["p", "--capacity", "-1"], &["p", "--capacity", "-1"]),
            (&["p", "-unknown=1"], &["p", "-unknown=1"]),
            (&["p", "--", "-endpoint=x"], &["p", "--", "-endpoint=x"]),
            (&["-endpoint=program-name-is-untouched"], &["-endpoint=program-name-is-untouched"]),
            (&["p", "-help"], &["p", "--help"]),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_go_style(strings(input)), strings(want), "{input:?}");
        }
    }

    #[test]
    fn parses_flags_into_a_config() {
        let args = normalize_go_style([
            "hostpath-plugin",
            "-endpoint=unix:///tmp/x.sock",
            "-nodeid=node-a",
            "--state-dir=/tmp/state",
            "--max-volume-size=2Gi",
            "--capacity=10Gi",
            "--accepted-mutable-parameters=iops",
            "--fault-config=/tmp/faults.json",
            "-no-single-node-multi-writer",
            "--no-block",
            "-node-mounts",
            "-maxvolumespernode=5",
            "--volume-health=list",
            "-v=4",
        ]);
        let flags = Flags::try_parse_from(args).unwrap();
        let config = flags.config();
        assert_eq!(flags.endpoint, "unix:///tmp/x.sock");
        assert_eq!(config.node_id, "node-a");
        assert_eq!(config.driver_name, "hostpath.csi.k8s.io");
        assert_eq!(config.max_volume_size, 2 << 30);
        assert_eq!(config.capacity, 10 << 30);
        assert_eq!(config.mutable_parameters, MutableParameterPolicy::from_flag("iops"));
        assert_eq!(config.fault_config, Some(PathBuf::from("/tmp/faults.json")));
        assert!(!config.single_node_multi_writer);
        assert!(!config.block);
        assert!(config.node_mounts);
        assert_eq!(config.max_volumes_per_node, 5);
        assert_eq!(config.volume_health, VolumeHealth::List);
        assert_eq!(flags.log_level(), tracing::Level::DEBUG);
    }

    #[test]
    fn applies_defaults_and_refuses_bad_values() {
        let flags = Flags::try_parse_from(["p", "--node-id=n", "--state-dir=/s"]).unwrap();
        assert_eq!(flags.max_volume_size, 1 << 40);
        assert_eq!(flags.capacity, 100 << 30);
        assert!(flags.config().mutable_parameters.enabled());
        assert!(flags.config().single_node_multi_writer);
        assert!(flags.config().block);
        assert!(!flags.config().node_mounts, "bookkeeping unless asked");
        assert_eq!(flags.config().volume_health, VolumeHealth::None, "health calls served, not advertised");
        assert_eq!(flags.log_level(), tracing::Level::INFO);
        let disabled = Flags::try_parse_from(["p", "--node-id=n", "--state-dir=/s", "--accepted-mutable-parameters="]);
        assert!(!disabled.unwrap().config().mutable_parameters.enabled());

        let bad: &[&[&str]] = &[
            &["p", "--state-dir=/s"],
            &["p", "--node-id=n"],
            &["p", "--node-id=n", "--state-dir=/s", "--capacity=lots"],
            &["p", "--node-id=n", "--state-dir=/s", "--max-volume-size=0"],
            &["p", "--node-id=n", "--state-dir=/s", "--v=high"],
        ];
        for args in bad {
            assert!(Flags::try_parse_from(*args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn the_proxy_needs_no_state_directory() {
        // The flags of Kubernetes' csi-mock-proxy.yaml manifest.
        let args =
            normalize_go_style(["p", "-v=5", "-nodeid=n1", "-endpoint=/csi/csi.sock", "-proxy-endpoint=tcp://:9000"]);
        let flags = Flags::try_parse_from(args).unwrap();
        assert_eq!(flags.proxy_endpoint.as_deref(), Some("tcp://:9000"));
        assert_eq!(flags.state_dir, None);
        assert!(Flags::try_parse_from(["p", "--node-id=n1"]).is_err(), "a plugin without a proxy needs its state");
    }

    #[test]
    fn a_repeated_flag_takes_its_last_value_as_in_go() {
        let args = normalize_go_style(["p", "-node-id=a", "-state-dir=/s", "-v=2", "--node-id=b", "-v=10"]);
        let flags = Flags::try_parse_from(args).unwrap();
        assert_eq!((flags.node_id.as_str(), flags.verbosity), ("b", 10));
    }
}
