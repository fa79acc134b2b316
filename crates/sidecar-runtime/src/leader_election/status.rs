//! Whether this process leads, shared between the elector (which writes it),
//! the `/healthz/leader-election` check and the `leader_election_master_status`
//! gauge (which read it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// How far past the lease duration a leader's last renewal may be before the
/// health check fails: csi-lib-utils registers client-go's adaptor with 20 s.
pub const HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

type MasterStatus = Family<Vec<(String, String)>, Gauge>;

/// Shared leadership state of one Lease, and of the process's other Leases for the health check. Cheap to clone;
/// all clones see the same state.
#[derive(Clone)]
pub struct LeaderStatus {
    state: Arc<Mutex<State>>,
    /// Every Lease of the process (this one included): one process may run several sidecars, each leading its own.
    all: Arc<Mutex<Vec<Arc<Mutex<State>>>>>,
    master_status: MasterStatus,
}

impl Default for LeaderStatus {
    fn default() -> LeaderStatus {
        let state = Arc::new(Mutex::new(State::default()));
        LeaderStatus { all: Arc::new(Mutex::new(vec![state.clone()])), state, master_status: MasterStatus::default() }
    }
}

#[derive(Default)]
struct State {
    leading: bool,
    /// This process led the Lease and no longer does (lost or released): it must not act again.
    ended: bool,
    last_renewal: Option<Instant>,
    lease_duration: Duration,
    renew_deadline: Duration,
    lock_name: Option<String>,
}

impl LeaderStatus {
    pub fn new() -> LeaderStatus {
        LeaderStatus::default()
    }

    /// The status of another Lease of this process: its own leadership, the same gauge and health check.
    pub fn another_lease(&self) -> LeaderStatus {
        let state = Arc::new(Mutex::new(State::default()));
        self.all.lock().unwrap_or_else(|p| p.into_inner()).push(state.clone());
        LeaderStatus { state, all: self.all.clone(), master_status: self.master_status.clone() }
    }

    /// Registers client-go's `leader_election_master_status{name}` gauge: 1 while
    /// this process leads the named Lease, 0 otherwise.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease",
            self.master_status.clone(),
        );
    }

    /// Called once by the elector, before it first tries the Lease.
    pub(crate) fn elector_started(&self, lock_name: &str, lease_duration: Duration, renew_deadline: Duration) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.lock_name = Some(lock_name.to_string());
        state.lease_duration = lease_duration;
        state.renew_deadline = renew_deadline;
        self.master_status.get_or_create(&label(lock_name)).set(0);
    }

    /// The Lease was acquired or renewed at `at`.
    pub(crate) fn renewed(&self, at: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.leading = true;
        state.last_renewal = Some(at);
        if let Some(name) = &state.lock_name {
            self.master_status.get_or_create(&label(name)).set(1);
        }
    }

    /// Leadership ended (lost or released).
    pub(crate) fn stopped(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.ended |= state.leading;
        state.leading = false;
        if let Some(name) = &state.lock_name {
            self.master_status.get_or_create(&label(name)).set(0);
        }
    }

    pub fn is_leading(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).leading
    }

    /// client-go's `HealthzAdaptor` check: a process that does not lead is
    /// healthy; a leader is unhealthy once its last successful renewal is older
    /// than the lease duration plus `tolerance`, i.e. its elector is stuck. With
    /// several Leases, each is checked.
    pub fn check(&self, now: Instant, tolerance: Duration) -> Result<(), NotLeading> {
        let all = self.all.lock().unwrap_or_else(|p| p.into_inner()).clone();
        all.iter().try_for_each(|state| check_one(&state.lock().unwrap_or_else(|p| p.into_inner()), now, tolerance))
    }
}

impl LeaderStatus {
    /// Whether this process may still act as the leader at `now`, over every Lease of the process: not once a Lease
    /// it led is lost or released, nor while a leader's last renewal is older than its renew deadline. Another
    /// replica may take a Lease over once its duration has passed since the last renewal it saw, and the renew
    /// deadline is shorter; so a leader paused (SIGSTOP, a stalled VM) past its Lease and running again stops before
    /// its next driver call, not only once its elector notices. A process that never led passes (its start-up calls).
    pub fn may_act(&self, now: Instant) -> Result<(), NotLeading> {
        let all = self.all.lock().unwrap_or_else(|p| p.into_inner()).clone();
        all.iter().try_for_each(|state| may_act_one(&state.lock().unwrap_or_else(|p| p.into_inner()), now))
    }

    /// [`LeaderStatus::may_act`] at the moment of each call, as a CSI client's fence ([`csi_client::Fence`]).
    pub fn fence(&self) -> csi_client::Fence {
        let status = self.clone();
        std::sync::Arc::new(move || status.may_act(Instant::now()).map_err(|refused| refused.to_string()))
    }
}

/// Why a process may not act as a leader, or why its leadership is unhealthy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotLeading {
    /// A Lease it led was lost or released.
    #[error("no longer the leader of lease {lease}")]
    Ended { lease: String },
    /// Its last renewal of a Lease is older than the renew deadline: another replica may lead.
    #[error(
        "lease {lease} last renewed {since:?} ago, not within the renew deadline {deadline:?}: another replica may lead"
    )]
    RenewalLate { lease: String, since: Duration, deadline: Duration },
    /// Its elector is stuck: no renewal for longer than the Lease's duration and the health tolerance.
    #[error("failed election to renew leadership on lease {lease}")]
    Stuck { lease: String },
}

fn may_act_one(state: &State, now: Instant) -> Result<(), NotLeading> {
    let lease = || state.lock_name.clone().unwrap_or_default();
    if state.ended {
        return Err(NotLeading::Ended { lease: lease() });
    }
    match state.last_renewal {
        Some(last) if state.leading && now.saturating_duration_since(last) >= state.renew_deadline => {
            Err(NotLeading::RenewalLate {
                lease: lease(),
                since: now.saturating_duration_since(last),
                deadline: state.renew_deadline,
            })
        }
        _ => Ok(()),
    }
}

fn check_one(state: &State, now: Instant, tolerance: Duration) -> Result<(), NotLeading> {
    if !state.leading {
        return Ok(());
    }
    let Some(last_renewal) = state.last_renewal else { return Ok(()) };
    let since = now.saturating_duration_since(last_renewal);
    if since > state.lease_duration + tolerance {
        return Err(NotLeading::Stuck { lease: state.lock_name.clone().unwrap_or_default() });
    }
    Ok(())
}

fn label(lock_name: &str) -> Vec<(String, String)> {
    vec![("name".to_string(), lock_name.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_follows_client_go() {
        let status = LeaderStatus::new();
        let t0 = Instant::now();
        assert_eq!(status.check(t0, HEALTH_TOLERANCE), Ok(()), "no elector: healthy");

        status.elector_started("lock", Duration::from_secs(15), Duration::from_secs(10));
        assert_eq!(status.check(t0 + Duration::from_secs(3600), HEALTH_TOLERANCE), Ok(()), "not leading: healthy");

        status.renewed(t0);
        assert!(status.is_leading());
        assert_eq!(status.check(t0 + Duration::from_secs(35), HEALTH_TOLERANCE), Ok(()), "at the limit: healthy");
        let err = status.check(t0 + Duration::from_secs(36), HEALTH_TOLERANCE).unwrap_err();
        assert_eq!(err, NotLeading::Stuck { lease: "lock".into() });
        assert_eq!(err.to_string(), "failed election to renew leadership on lease lock", "client-go's text");

        status.renewed(t0 + Duration::from_secs(30));
        assert_eq!(status.check(t0 + Duration::from_secs(36), HEALTH_TOLERANCE), Ok(()), "renewed again");

        status.stopped();
        assert!(!status.is_leading());
        assert_eq!(status.check(t0 + Duration::from_secs(3600), HEALTH_TOLERANCE), Ok(()));
    }

    #[test]
    fn every_lease_of_the_process_is_checked() {
        let first = LeaderStatus::new();
        let second = first.another_lease();
        let t0 = Instant::now();
        first.elector_started("provisioner-lease", Duration::from_secs(15), Duration::from_secs(10));
        second.elector_started("resizer-lease", Duration::from_secs(15), Duration::from_secs(10));
        first.renewed(t0 + Duration::from_secs(60));
        second.renewed(t0);
        assert!(first.is_leading() && second.is_leading());
        let err = first.check(t0 + Duration::from_secs(61), HEALTH_TOLERANCE).unwrap_err();
        assert_eq!(err, NotLeading::Stuck { lease: "resizer-lease".into() }, "the stuck Lease is named");
        second.stopped();
        assert!(first.is_leading(), "each Lease has its own leadership");
        assert_eq!(first.check(t0 + Duration::from_secs(61), HEALTH_TOLERANCE), Ok(()));
    }

    #[test]
    fn the_gauge_shows_leadership() {
        let mut registry = Registry::default();
        let status = LeaderStatus::new();
        status.register(&mut registry);
        status.elector_started("hostpath-csi-k8s-io", Duration::from_secs(15), Duration::from_secs(10));
        let render = |registry: &Registry| {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
            text
        };
        assert!(render(&registry).contains("leader_election_master_status{name=\"hostpath-csi-k8s-io\"} 0"));
        status.renewed(Instant::now());
        assert!(render(&registry).contains("leader_election_master_status{name=\"hostpath-csi-k8s-io\"} 1"));
    }

    #[test]
    fn a_leader_acts_only_within_its_renew_deadline_and_never_after_it_stopped() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let status = LeaderStatus::new();
        status.elector_started("lock", s(15), s(10));
        assert_eq!(status.may_act(t0), Ok(()), "not leading yet: start-up calls pass");
        status.renewed(t0);
        // (seconds since the last renewal, may act)
        for (after, acts) in [(0, true), (9, true), (10, false), (60, false)] {
            assert_eq!(status.may_act(t0 + s(after)).is_ok(), acts, "{after} s after the renewal");
        }
        assert_eq!(
            status.may_act(t0 + s(10)).unwrap_err().to_string(),
            "lease lock last renewed 10s ago, not within the renew deadline 10s: another replica may lead"
        );
        status.renewed(t0 + s(60));
        assert_eq!(status.may_act(t0 + s(61)), Ok(()), "renewed again");
        let other = status.another_lease();
        other.elector_started("other", s(15), s(10));
        other.renewed(t0 + s(61));
        other.stopped();
        let refused = status.may_act(t0 + s(61)).unwrap_err();
        assert_eq!(refused, NotLeading::Ended { lease: "other".into() }, "any Lease of the process counts");
        assert_eq!(refused.to_string(), "no longer the leader of lease other");
        assert_eq!((status.fence())(), Err(refused.to_string()), "the fence asks the same");
    }
}
