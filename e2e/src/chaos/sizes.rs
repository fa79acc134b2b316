//! How big a chaos run is, from `CHAOS_*` environment variables (docs/chaos.md), and which claims each step
//! picks.

use std::time::Duration;

/// The phases, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Provision,
    Change,
    Snapshot,
    Group,
}

impl Phase {
    fn parse(name: &str) -> Option<Phase> {
        match name.trim() {
            "provision" => Some(Phase::Provision),
            "change" | "expand" | "modify" => Some(Phase::Change),
            "snapshot" | "snapshots" => Some(Phase::Snapshot),
            "group" | "groups" => Some(Phase::Group),
            _ => None,
        }
    }
}

/// One run's sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes {
    /// `CHAOS_CLAIMS` [300]: claims created in the provision phase.
    pub claims: usize,
    /// `CHAOS_DELETE_SHARE` [0.2]: share of them deleted while being provisioned (every other one of those is
    /// created again under its name once the first is gone).
    pub delete_share: f64,
    /// `CHAOS_DELETE_BOUND_SHARE` [0.1]: share of the others deleted the moment they are seen Bound, while the PV
    /// binder's write may still queue them at the provisioner (external-provisioner#1469).
    pub delete_bound_share: f64,
    /// `CHAOS_KILL_EVERY` [20] seconds between two SIGKILLs of a sidecar replica.
    pub kill_every: Duration,
    /// `CHAOS_MIN_KILLS` [4]: each phase with replicas lasts until this many kills are done.
    pub min_kills: usize,
    /// `CHAOS_CHANGE_SHARE` [0.3]: share of the surviving claims expanded, and (another) share moved between
    /// VolumeAttributesClasses.
    pub change_share: f64,
    /// `CHAOS_SNAPSHOTS` [40]: VolumeSnapshots created (a quarter of them deleted again).
    pub snapshots: usize,
    /// `CHAOS_MASS_SNAPSHOTS` [100]: VolumeSnapshots created together in the snapshot phase and, once ready, all
    /// deleted at once (external-snapshotter#1446).
    pub mass_snapshots: usize,
    /// `CHAOS_GROUPS` [20]: VolumeGroupSnapshots created, each of 3 to 5 claims (a quarter of them deleted again).
    pub groups: usize,
    /// `CHAOS_RESTART_APISERVER` [1]: restart kube-apiserver once in every phase (0 for a shared cluster, as in
    /// `make test`).
    pub restart_apiserver: bool,
    /// `CHAOS_RESTART_ETCD` [1]: restart etcd once, in the change phase (0 for a shared cluster).
    pub restart_etcd: bool,
    /// `CHAOS_API_FAULT_SHARE` [0.1]: share of the sidecars' API requests (watches aside) the API proxy answers
    /// itself with 429, 500, 503 or a reset (e2e/src/control_plane/api_proxy.rs); 0 for none, watches not cut either.
    pub api_fault_share: f64,
    /// `CHAOS_HANG_SECONDS` [8]: how long a hanging call sleeps; the sidecars run with `--timeout=5s`.
    pub hang_for: Duration,
    /// `CHAOS_QUIESCE_SECONDS` [300]: how long the quiet period may take to reach the invariants.
    pub quiesce_timeout: Duration,
    /// `CHAOS_PHASES` [provision,change,snapshot,group]: the phases to run, in this order.
    pub phases: Vec<Phase>,
}

impl Default for Sizes {
    fn default() -> Sizes {
        Sizes {
            claims: 300,
            delete_share: 0.2,
            delete_bound_share: 0.1,
            kill_every: Duration::from_secs(20),
            min_kills: 4,
            change_share: 0.3,
            snapshots: 40,
            mass_snapshots: 100,
            groups: 20,
            restart_apiserver: true,
            restart_etcd: true,
            api_fault_share: 0.1,
            hang_for: Duration::from_secs(8),
            quiesce_timeout: Duration::from_secs(300),
            phases: vec![Phase::Provision, Phase::Change, Phase::Snapshot, Phase::Group],
        }
    }
}

impl Sizes {
    /// The defaults, with every variable `lookup` knows applied.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Sizes, String> {
        let mut sizes = Sizes::default();
        let number = |name: &str| -> Result<Option<f64>, String> {
            let Some(text) = lookup(name) else { return Ok(None) };
            let value: f64 = text.trim().parse().map_err(|_| format!("{name}={text:?} is not a number"))?;
            if value.is_sign_negative() || !value.is_finite() {
                return Err(format!("{name}={text:?} must be a finite number ≥ 0"));
            }
            Ok(Some(value))
        };
        let share = |name: &str| -> Result<Option<f64>, String> {
            match number(name)? {
                Some(value) if value > 1.0 => Err(format!("{name}={value} is a share between 0 and 1")),
                other => Ok(other),
            }
        };
        if let Some(v) = number("CHAOS_CLAIMS")? {
            sizes.claims = v as usize;
        }
        if let Some(v) = share("CHAOS_DELETE_SHARE")? {
            sizes.delete_share = v;
        }
        if let Some(v) = share("CHAOS_DELETE_BOUND_SHARE")? {
            sizes.delete_bound_share = v;
        }
        if let Some(v) = number("CHAOS_KILL_EVERY")? {
            sizes.kill_every = Duration::from_secs_f64(v);
        }
        if let Some(v) = number("CHAOS_MIN_KILLS")? {
            sizes.min_kills = v as usize;
        }
        if let Some(v) = share("CHAOS_CHANGE_SHARE")? {
            sizes.change_share = v;
        }
        if let Some(v) = number("CHAOS_SNAPSHOTS")? {
            sizes.snapshots = v as usize;
        }
        if let Some(v) = number("CHAOS_MASS_SNAPSHOTS")? {
            sizes.mass_snapshots = v as usize;
        }
        if let Some(v) = number("CHAOS_GROUPS")? {
            sizes.groups = v as usize;
        }
        if let Some(v) = number("CHAOS_RESTART_APISERVER")? {
            sizes.restart_apiserver = v != 0.0;
        }
        if let Some(v) = number("CHAOS_RESTART_ETCD")? {
            sizes.restart_etcd = v != 0.0;
        }
        if let Some(v) = share("CHAOS_API_FAULT_SHARE")? {
            sizes.api_fault_share = v;
        }
        if let Some(v) = number("CHAOS_HANG_SECONDS")? {
            sizes.hang_for = Duration::from_secs_f64(v);
        }
        if let Some(v) = number("CHAOS_QUIESCE_SECONDS")? {
            sizes.quiesce_timeout = Duration::from_secs_f64(v);
        }
        if let Some(list) = lookup("CHAOS_PHASES") {
            sizes.phases = list
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| Phase::parse(p).ok_or_else(|| format!("CHAOS_PHASES: unknown phase {p:?}")))
                .collect::<Result<_, _>>()?;
        }
        Ok(sizes)
    }

    pub fn from_env() -> Result<Sizes, String> {
        Sizes::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn runs(&self, phase: Phase) -> bool {
        self.phases.contains(&phase)
    }

    /// How long a phase with replicas lasts: until `min_kills` kills, `kill_every` apart, are done.
    pub fn kill_window(&self) -> Duration {
        self.kill_every.mul_f64(self.min_kills.max(1) as f64)
    }
}

/// A control-plane process the run restarts (`e2e/cluster.sh restart <name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Etcd,
    ApiServer,
}

impl Component {
    /// The name e2e/cluster.sh knows it by.
    pub fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::ApiServer => "kube-apiserver",
        }
    }
}

/// When `phase` restarts the control plane, in time from its start within its `window`, in order: kube-apiserver
/// once in every phase (at 60 % of the provision phase, as before, and half-way through the others), etcd once in
/// the whole run, a quarter into the change phase.
pub fn control_plane_restarts(sizes: &Sizes, phase: Phase, window: Duration) -> Vec<(Duration, Component)> {
    let apiserver_at = if phase == Phase::Provision { 0.6 } else { 0.5 };
    let mut restarts = Vec::new();
    if sizes.restart_etcd && phase == Phase::Change {
        restarts.push((window.mul_f64(0.25), Component::Etcd));
    }
    if sizes.restart_apiserver {
        restarts.push((window.mul_f64(apiserver_at), Component::ApiServer));
    }
    restarts
}

/// When the replicas of one sidecar are killed within a phase's `window`: every `every`, the first at `every` less
/// `ahead`. Two sidecars killed in one phase take turns with `ahead` of half a period, so each is killed as often
/// and never at the same moment as the other.
pub fn kill_times(every: Duration, window: Duration, ahead: Duration) -> Vec<Duration> {
    if every.is_zero() {
        return Vec::new();
    }
    (1..).map(|k| (every * k).saturating_sub(ahead)).take_while(|t| *t <= window).collect()
}

/// Whether item `index` belongs to an evenly spread `share` of a sequence: exactly ⌊n × share⌋ of the first n
/// items are picked, whatever n.
pub fn picked(index: usize, share: f64) -> bool {
    let before = (index as f64 * share).floor();
    let after = ((index + 1) as f64 * share).floor();
    after > before
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn sizes(vars: &[(&str, &str)]) -> Result<Sizes, String> {
        let vars: BTreeMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Sizes::from_lookup(|name| vars.get(name).cloned())
    }

    /// One row: a variable, its value, and how to read the field it sets.
    type Row = (&'static str, &'static str, fn(&Sizes) -> String);

    #[test]
    fn reads_each_variable() {
        assert_eq!(sizes(&[]).unwrap(), Sizes::default());
        let rows: &[Row] = &[
            ("CHAOS_CLAIMS", "40", |s| s.claims.to_string()),
            ("CHAOS_DELETE_SHARE", "0.5", |s| s.delete_share.to_string()),
            ("CHAOS_DELETE_BOUND_SHARE", "0.25", |s| s.delete_bound_share.to_string()),
            ("CHAOS_KILL_EVERY", "7", |s| format!("{:?}", s.kill_every)),
            ("CHAOS_MIN_KILLS", "2", |s| s.min_kills.to_string()),
            ("CHAOS_CHANGE_SHARE", "1", |s| s.change_share.to_string()),
            ("CHAOS_SNAPSHOTS", "8", |s| s.snapshots.to_string()),
            ("CHAOS_MASS_SNAPSHOTS", "20", |s| s.mass_snapshots.to_string()),
            ("CHAOS_GROUPS", "3", |s| s.groups.to_string()),
            ("CHAOS_RESTART_APISERVER", "0", |s| s.restart_apiserver.to_string()),
            ("CHAOS_RESTART_ETCD", "0", |s| s.restart_etcd.to_string()),
            ("CHAOS_API_FAULT_SHARE", "0.05", |s| s.api_fault_share.to_string()),
            ("CHAOS_HANG_SECONDS", "1.5", |s| format!("{:?}", s.hang_for)),
            ("CHAOS_QUIESCE_SECONDS", "60", |s| format!("{:?}", s.quiesce_timeout)),
            ("CHAOS_PHASES", "snapshot, provision", |s| format!("{:?}", s.phases)),
            ("CHAOS_PHASES", "groups,change", |s| format!("{:?}", s.phases)),
        ];
        let want = [
            "40",
            "0.5",
            "0.25",
            "7s",
            "2",
            "1",
            "8",
            "20",
            "3",
            "false",
            "false",
            "0.05",
            "1.5s",
            "60s",
            "[Snapshot, Provision]",
            "[Group, Change]",
        ];
        for ((name, value, read), want) in rows.iter().zip(want) {
            assert_eq!(read(&sizes(&[(name, value)]).unwrap()), want, "{name}={value}");
        }
    }

    #[test]
    fn refuses_bad_values() {
        let rows: &[(&str, &str, &str)] = &[
            ("CHAOS_CLAIMS", "many", "not a number"),
            ("CHAOS_CLAIMS", "-3", "≥ 0"),
            ("CHAOS_DELETE_SHARE", "20", "share between 0 and 1"),
            ("CHAOS_DELETE_BOUND_SHARE", "1.5", "share between 0 and 1"),
            ("CHAOS_KILL_EVERY", "inf", "finite"),
            ("CHAOS_PHASES", "provision,attach", "unknown phase \"attach\""),
        ];
        for (name, value, want) in rows {
            let err = sizes(&[(name, value)]).unwrap_err();
            assert!(err.contains(want), "{name}={value}: {err}");
        }
    }

    #[test]
    fn every_phase_runs_by_default() {
        let sizes = Sizes::default();
        for phase in [Phase::Provision, Phase::Change, Phase::Snapshot, Phase::Group] {
            assert!(sizes.runs(phase), "{phase:?}");
        }
        assert_eq!(sizes.kill_window(), Duration::from_secs(80));
    }

    #[test]
    fn the_control_plane_restarts_in_every_phase_and_etcd_once() {
        use Component::*;
        let window = Duration::from_secs(80);
        let s = Duration::from_secs;
        let all = Sizes::default();
        let shared = Sizes { restart_apiserver: false, restart_etcd: false, ..Sizes::default() };
        type Row<'a> = (&'a Sizes, Phase, &'a [(Duration, Component)]);
        let rows: &[Row] = &[
            (&all, Phase::Provision, &[(s(48), ApiServer)]),
            (&all, Phase::Change, &[(s(20), Etcd), (s(40), ApiServer)]),
            (&all, Phase::Snapshot, &[(s(40), ApiServer)]),
            (&all, Phase::Group, &[(s(40), ApiServer)]),
            (&shared, Phase::Provision, &[]),
            (&shared, Phase::Change, &[]),
        ];
        for (sizes, phase, want) in rows {
            assert_eq!(control_plane_restarts(sizes, *phase, window), *want, "{phase:?}");
        }
        let etcd_only = Sizes { restart_apiserver: false, ..Sizes::default() };
        assert_eq!(control_plane_restarts(&etcd_only, Phase::Change, window), [(s(20), Etcd)]);
        assert_eq!((Etcd.name(), ApiServer.name()), ("etcd", "kube-apiserver"));
    }

    #[test]
    fn kills_take_turns() {
        let s = Duration::from_secs;
        let rows: &[(Duration, Duration, Duration, &[u64])] = &[
            (s(20), s(80), s(0), &[20, 40, 60, 80]),
            (s(20), s(80), s(10), &[10, 30, 50, 70]),
            (s(10), s(20), s(5), &[5, 15]),
            (s(20), s(19), s(0), &[]),
            (s(0), s(80), s(0), &[]),
        ];
        for (every, window, ahead, want) in rows {
            let got: Vec<u64> = kill_times(*every, *window, *ahead).iter().map(Duration::as_secs).collect();
            assert_eq!(got, *want, "every {every:?} within {window:?}, {ahead:?} ahead");
        }
    }

    #[test]
    fn picks_an_even_share() {
        let rows: &[(f64, usize, usize)] = &[(0.2, 300, 60), (0.2, 40, 8), (0.3, 10, 3), (0.0, 50, 0), (1.0, 7, 7)];
        for (share, n, want) in rows {
            assert_eq!((0..*n).filter(|i| picked(*i, *share)).count(), *want, "{share} of {n}");
        }
        // Spread, not bunched: a fifth picks one of every five in a row.
        let firsts: Vec<usize> = (0..15).filter(|i| picked(*i, 0.2)).collect();
        assert_eq!(firsts, [4, 9, 14]);
    }
}
