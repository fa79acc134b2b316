//! Leader election on a `coordination.k8s.io/v1` Lease, interoperable with
//! client-go's (and so with the upstream sidecars during a rolling upgrade).
//!
//! Why our own and not kube-lease-manager: that crate writes with server-side
//! apply and models a lease as duration plus grace, in whole seconds, with a
//! random identity. What must hold here is client-go's contract: the
//! renew-deadline / retry-period loop, expiry judged by local observation,
//! `leaseTransitions` bumped on takeover, `acquireTime` kept on renewal, the
//! hostname identity and a release that leaves an empty holder. That is about
//! two hundred lines when written directly, and the rules sit in a pure function
//! ([`decision::decide`]) with a table of tests.
//!
//! - [`decision`]: the rules, no I/O.
//! - [`lease`]: Lease reads and optimistic writes.
//! - [`names`]: Lease names per sidecar and identity sanitising.
//! - [`status`]: leadership as the health check and metrics see it.

pub mod decision;
pub mod lease;
pub mod names;
pub mod status;

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::events::{EventRecorder, EventType};
use crate::flags::CommonArgs;
use decision::{Decision, Now, Observer};
use lease::{LeaseLock, record_from_lease};
pub use names::{
    SNAPSHOT_CONTROLLER_LEASE_NAME, attacher_lease_name, default_identity, group_snapshotter_lease_name,
    provisioner_lease_name, resizer_lease_name, sanitize_name, snapshotter_lease_name,
};
pub use status::{HEALTH_TOLERANCE, LeaderStatus, NotLeading};

const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Why leader election could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("leader election: {0}")]
    Invalid(&'static str),
}

/// Everything an elector needs to know, as csi-lib-utils derives it from flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    pub namespace: String,
    pub lock_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub labels: BTreeMap<String, String>,
}

impl LeaderElectionConfig {
    /// The configuration for `lock_name` (use the helpers in [`names`]): lock
    /// name and hostname identity sanitised, namespace from the flag, else
    /// `$POD_NAMESPACE`, else the service account's namespace, else `default`.
    pub fn from_args(args: &CommonArgs, lock_name: &str) -> Result<LeaderElectionConfig, ConfigError> {
        let namespace = lease_namespace(args);
        let config = LeaderElectionConfig {
            namespace,
            lock_name: sanitize_name(lock_name),
            identity: default_identity(),
            lease_duration: args.leader_election_lease_duration,
            renew_deadline: args.leader_election_renew_deadline,
            retry_period: args.leader_election_retry_period,
            labels: args.leader_election_labels(),
        };
        config.validate()?;
        Ok(config)
    }

    /// client-go's sanity rules for the three durations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_duration < Duration::from_secs(1) {
            return Err(ConfigError::Invalid("lease duration must be at least 1s (the Lease stores whole seconds)"));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::Invalid("lease duration must be greater than renew deadline"));
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(ConfigError::Invalid("renew deadline must be greater than retry period * 1.2"));
        }
        if self.retry_period.is_zero() {
            return Err(ConfigError::Invalid("retry period must be greater than zero"));
        }
        if self.identity.is_empty() || self.lock_name.is_empty() || self.namespace.is_empty() {
            return Err(ConfigError::Invalid("identity, lock name and namespace must not be empty"));
        }
        Ok(())
    }
}

/// client-go's jitter factor for acquire retries; also bounds the renew deadline.
const JITTER_FACTOR: f64 = 1.2;

/// The namespace of the sidecar's Leases (the leader-election one, and others beside it): see [`resolve_namespace`].
pub fn lease_namespace(args: &CommonArgs) -> String {
    resolve_namespace(
        args.leader_election_namespace.as_deref(),
        std::env::var("POD_NAMESPACE").ok(),
        Path::new(SERVICE_ACCOUNT_NAMESPACE),
    )
}

/// csi-lib-utils' namespace order: flag, `$POD_NAMESPACE`, service-account file, `default`.
pub fn resolve_namespace(flag: Option<&str>, pod_namespace: Option<String>, service_account_file: &Path) -> String {
    if let Some(ns) = flag.filter(|ns| !ns.is_empty()) {
        return ns.to_string();
    }
    if let Some(ns) = pod_namespace.filter(|ns| !ns.is_empty()) {
        return ns;
    }
    match std::fs::read_to_string(service_account_file) {
        Ok(ns) if !ns.trim().is_empty() => ns.trim().to_string(),
        _ => "default".to_string(),
    }
}

/// How leading ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// The caller asked to stop; the Lease is still ours until it expires or is released.
    Stopped,
    /// Renewal failed for the whole renew deadline, or another holder took the Lease.
    Lost,
}

/// Outcome of one try at the Lease.
enum Attempt {
    Leading,
    HeldBy(String),
}

/// One contender for one Lease.
pub struct LeaderElector {
    lock: LeaseLock,
    config: LeaderElectionConfig,
    observer: Observer,
    /// The Lease as last read or written, for the renewal fast path and release.
    lease: Option<k8s_openapi::api::coordination::v1::Lease>,
    reported_holder: Option<String>,
    status: LeaderStatus,
    events: Option<EventRecorder>,
}

impl LeaderElector {
    /// `client` should be one of its own, as csi-lib-utils gives the elector a
    /// separate clientset: controller traffic must never starve renewals of
    /// rate-limit tokens.
    pub fn new(client: kube::Client, config: LeaderElectionConfig, status: LeaderStatus) -> LeaderElector {
        let lock = LeaseLock::new(client.clone(), &config.namespace, &config.lock_name, config.labels.clone());
        status.elector_started(&config.lock_name, config.lease_duration, config.renew_deadline);
        // csi-lib-utils' event source for leader-election events.
        let events = EventRecorder::new(client, format!("{}/{}", config.lock_name, config.identity));
        LeaderElector {
            lock,
            config,
            observer: Observer::default(),
            lease: None,
            reported_holder: None,
            status,
            events: Some(events),
        }
    }

    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    pub fn status(&self) -> &LeaderStatus {
        &self.status
    }

    /// Tries every retry period (with jitter) until this elector leads; returns
    /// false if `cancel` fires first.
    pub async fn acquire(&mut self, cancel: &CancellationToken) -> bool {
        tracing::info!(lease = %self.lock.describe(), identity = %self.config.identity, "attempting to acquire leader lease");
        loop {
            let attempt = tokio::select! {
                _ = cancel.cancelled() => return false,
                attempt = tokio::time::timeout(self.config.lease_duration, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(Attempt::Leading)) => {
                    tracing::info!(lease = %self.lock.describe(), identity = %self.config.identity, "successfully acquired lease");
                    self.record_event("became leader").await;
                    return true;
                }
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    tracing::debug!(lease = %self.lock.describe(), %holder, "lease is held by another elector");
                }
                Ok(Err(err)) => tracing::warn!(lease = %self.lock.describe(), error = %err, "failed to acquire lease"),
                Err(_) => tracing::warn!(lease = %self.lock.describe(), "acquiring the lease timed out"),
            }
            let pause = jittered(self.config.retry_period);
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Renews every retry period while leading. Returns [`Renewal::Lost`] when
    /// no renewal succeeded within the renew deadline, or the Lease turned out
    /// to be someone else's; the caller must then stop all work at once (the
    /// upstream sidecars exit 1).
    pub async fn keep_leading(&mut self, stop: &CancellationToken) -> Renewal {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Renewal::Stopped,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            let deadline = Instant::now() + self.config.renew_deadline;
            loop {
                let remaining = deadline.saturating_duration_since(Instant::now());
                let attempt = tokio::select! {
                    _ = stop.cancelled() => return Renewal::Stopped,
                    attempt = tokio::time::timeout(remaining, self.try_acquire_or_renew()) => attempt,
                };
                match attempt {
                    Ok(Ok(Attempt::Leading)) => break,
                    Ok(Ok(Attempt::HeldBy(holder))) => {
                        tracing::error!(lease = %self.lock.describe(), %holder, "the lease is held by another elector");
                        return self.lost().await;
                    }
                    Ok(Err(err)) => {
                        tracing::warn!(lease = %self.lock.describe(), error = %err, "failed to renew lease")
                    }
                    Err(_) => {}
                }
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    tracing::error!(lease = %self.lock.describe(), deadline = ?self.config.renew_deadline, "failed to renew lease within the renew deadline");
                    return self.lost().await;
                }
                tokio::select! {
                    _ = stop.cancelled() => return Renewal::Stopped,
                    _ = tokio::time::sleep(self.config.retry_period.min(remaining)) => {}
                }
            }
        }
    }

    /// Gives the Lease up so the next elector need not wait for it to expire
    /// (client-go's ReleaseOnCancel). Only writes if this elector holds it.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        self.status.stopped();
        let (Some(lease), Some(current)) = (&self.lease, self.observer.record()) else { return Ok(()) };
        if current.holder_identity != self.config.identity {
            return Ok(());
        }
        let record = decision::released(current, now().wall);
        let written = self.lock.update(lease, &record).await?;
        self.observer.wrote(&record_from_lease(&written), Instant::now());
        self.lease = Some(written);
        tracing::info!(lease = %self.lock.describe(), "released leader lease");
        Ok(())
    }

    async fn lost(&mut self) -> Renewal {
        self.status.stopped();
        tracing::info!(lease = %self.lock.describe(), identity = %self.config.identity, "stopped leading");
        // Best effort: the process is about to exit.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.record_event("stopped leading")).await;
        Renewal::Lost
    }

    /// client-go's `tryAcquireOrRenew`: one read (skipped while we hold a
    /// valid lease) and at most one write.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let identity = self.config.identity.clone();
        let duration = self.config.lease_duration;

        // Fast path while leading: write over the Lease we last wrote. A
        // conflict means someone else wrote; fall back to reading it.
        if self.status.is_leading()
            && let (Some(lease), Some(observed_at)) = (self.lease.clone(), self.observer.observed_at())
            && let Decision::Write { record, takeover: false } =
                decision::decide(self.observer.record(), observed_at, now(), &identity, duration)
        {
            match self.lock.update(&lease, &record).await {
                Ok(written) => return Ok(self.wrote(written)),
                Err(err) => tracing::debug!(error = %err, "fast renewal failed, reading the lease"),
            }
        }

        let Some(lease) = self.lock.get().await? else {
            self.observer.forget();
            let now = now();
            let Decision::Create(record) = decision::decide(None, now.instant, now, &identity, duration) else {
                unreachable!("a missing lease is always created");
            };
            let created = self.lock.create(&record).await?;
            return Ok(self.wrote(created));
        };

        let current = record_from_lease(&lease);
        let now = now();
        let observed_at = self.observer.observe(&current, now.instant);
        self.report_holder(&current.holder_identity);
        let decision = decision::decide(Some(&current), observed_at, now, &identity, duration);
        self.lease = Some(lease.clone());
        match decision {
            Decision::Wait { holder } => Ok(Attempt::HeldBy(holder)),
            Decision::Write { record, takeover } => {
                let written = self.lock.update(&lease, &record).await?;
                if takeover {
                    tracing::info!(lease = %self.lock.describe(), previous = %current.holder_identity, "took over lease");
                }
                Ok(self.wrote(written))
            }
            Decision::Create(_) => unreachable!("an existing lease is never created"),
        }
    }

    fn wrote(&mut self, lease: k8s_openapi::api::coordination::v1::Lease) -> Attempt {
        let now = Instant::now();
        let record = record_from_lease(&lease);
        self.observer.wrote(&record, now);
        self.report_holder(&record.holder_identity);
        self.lease = Some(lease);
        self.status.renewed(now);
        Attempt::Leading
    }

    fn report_holder(&mut self, holder: &str) {
        if self.reported_holder.as_deref() != Some(holder) {
            if !holder.is_empty() && holder != self.config.identity {
                tracing::info!(lease = %self.lock.describe(), leader = %holder, "new leader detected");
            }
            self.reported_holder = Some(holder.to_string());
        }
    }

    /// client-go records "<identity> became leader" / "stopped leading" on the Lease.
    async fn record_event(&self, what: &str) {
        let (Some(events), Some(lease)) = (&self.events, &self.lease) else { return };
        let object = ObjectReference {
            api_version: Some("coordination.k8s.io/v1".into()),
            kind: Some("Lease".into()),
            namespace: lease.metadata.namespace.clone(),
            name: lease.metadata.name.clone(),
            uid: lease.metadata.uid.clone(),
            resource_version: lease.metadata.resource_version.clone(),
            ..ObjectReference::default()
        };
        let message = format!("{} {what}", self.config.identity);
        events.publish(&object, EventType::Normal, "LeaderElection", &message).await;
    }
}

/// The clocks for a decision. Wall time is cut to microseconds, the Lease's
/// precision, so a record written and read back compares equal.
fn now() -> Now {
    let wall = Timestamp::now();
    let wall = Timestamp::from_microsecond(wall.as_microsecond()).unwrap_or(wall);
    Now { instant: Instant::now(), wall }
}

/// `period` stretched by up to 20%, so that electors started together drift apart.
fn jittered(period: Duration) -> Duration {
    let random = RandomState::new().hash_one(Instant::now());
    let fraction = (random % 1000) as f64 / 1000.0 * 0.2;
    period.mul_f64(1.0 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: "default".into(),
            lock_name: "lock".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(5),
            labels: BTreeMap::new(),
        }
    }

    type Breaker = fn(&mut LeaderElectionConfig);

    #[test]
    fn durations_are_checked_as_client_go_does() {
        assert!(config().validate().is_ok());
        let cases: &[(&str, Breaker)] = &[
            ("lease == renew", |c| c.renew_deadline = c.lease_duration),
            ("renew <= 1.2 retry", |c| c.retry_period = Duration::from_millis(8500)),
            ("zero retry", |c| c.retry_period = Duration::ZERO),
            ("sub-second lease", |c| {
                c.lease_duration = Duration::from_millis(900);
                c.renew_deadline = Duration::from_millis(800);
                c.retry_period = Duration::from_millis(100);
            }),
            ("empty identity", |c| c.identity.clear()),
        ];
        for (name, break_it) in cases {
            let mut config = config();
            break_it(&mut config);
            assert!(config.validate().is_err(), "{name}");
        }
    }

    #[test]
    fn namespace_resolution_order() {
        let dir = tempfile::tempdir().unwrap();
        let sa_file = dir.path().join("namespace");
        let missing = dir.path().join("missing");
        std::fs::write(&sa_file, "from-sa\n").unwrap();
        let cases: &[(Option<&str>, Option<&str>, &Path, &str)] = &[
            (Some("flag"), Some("env"), &sa_file, "flag"),
            (Some(""), Some("env"), &sa_file, "env"),
            (None, Some("env"), &sa_file, "env"),
            (None, Some(""), &sa_file, "from-sa"),
            (None, None, &sa_file, "from-sa"),
            (None, None, &missing, "default"),
        ];
        for (flag, env, file, expected) in cases {
            assert_eq!(resolve_namespace(*flag, env.map(String::from), file), *expected, "{flag:?} {env:?} {file:?}");
        }
    }

    #[test]
    fn from_args_sanitises_and_takes_the_flags() {
        let args: crate::flags::CommonArgs = {
            #[derive(clap::Parser)]
            struct P {
                #[command(flatten)]
                common: CommonArgs,
            }
            crate::flags::try_parse_from::<P, _, _>([
                "x",
                "--leader-election-namespace=kube-system",
                "--leader-election-lease-duration=30s",
                "--leader-election-renew-deadline=20s",
                "--leader-election-retry-period=2s",
                "--leader-election-labels=app:csi",
            ])
            .unwrap()
            .common
        };
        let config = LeaderElectionConfig::from_args(&args, "hostpath.csi.k8s.io").unwrap();
        assert_eq!(config.lock_name, "hostpath-csi-k8s-io");
        assert_eq!(config.namespace, "kube-system");
        assert_eq!(config.lease_duration, Duration::from_secs(30));
        assert_eq!(config.renew_deadline, Duration::from_secs(20));
        assert_eq!(config.retry_period, Duration::from_secs(2));
        assert_eq!(config.labels.get("app").map(String::as_str), Some("csi"));
        assert_eq!(config.identity, default_identity());
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(5));
            assert!(d >= Duration::from_secs(5) && d <= Duration::from_secs(6), "{d:?}");
        }
    }
}
