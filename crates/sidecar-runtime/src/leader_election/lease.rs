//! Reading and writing the `coordination.k8s.io/v1` Lease the way client-go's
//! `LeaseLock` does, so that Go and Rust electors understand each other's
//! records. Every write is a full replace carrying the resourceVersion that was
//! read: if anyone wrote in between, the API server refuses with a conflict and
//! this elector simply does not lead this round.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::decision::LeaderRecord;

/// The Lease an elector contends for.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    labels: BTreeMap<String, String>,
}

impl LeaseLock {
    pub fn new(client: kube::Client, namespace: &str, name: &str, labels: BTreeMap<String, String>) -> LeaseLock {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            labels,
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `namespace/name`, as client-go logs it.
    pub fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    pub async fn create(&self, record: &LeaderRecord) -> Result<Lease, kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec_from_record(record, None)),
        };
        self.api.create(&PostParams::default(), &lease).await
    }

    /// Replaces `current` (as read, with its resourceVersion) with `record`.
    /// The configured labels are merged into the Lease's own.
    pub async fn update(&self, current: &Lease, record: &LeaderRecord) -> Result<Lease, kube::Error> {
        let mut lease = current.clone();
        if !self.labels.is_empty() {
            lease.metadata.labels.get_or_insert_with(BTreeMap::new).extend(self.labels.clone());
        }
        lease.spec = Some(spec_from_record(record, current.spec.as_ref()));
        self.api.replace(&self.name, &PostParams::default(), &lease).await
    }
}

/// The leadership record a Lease carries. A Lease without a spec has no holder.
pub fn record_from_lease(lease: &Lease) -> LeaderRecord {
    let Some(spec) = &lease.spec else { return LeaderRecord::default() };
    LeaderRecord {
        holder_identity: spec.holder_identity.clone().unwrap_or_default(),
        lease_duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
        acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
        renew_time: spec.renew_time.as_ref().map(|t| t.0),
        leader_transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// The spec to write for `record`. Fields this elector does not manage
/// (`strategy`, `preferredHolder`, used by coordinated leader election) are
/// kept as they were.
pub fn spec_from_record(record: &LeaderRecord, current: Option<&LeaseSpec>) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(record.holder_identity.clone()),
        lease_duration_seconds: Some(record.lease_duration.as_secs().min(i32::MAX as u64) as i32),
        acquire_time: record.acquire_time.map(MicroTime),
        renew_time: record.renew_time.map(MicroTime),
        lease_transitions: Some(record.leader_transitions),
        strategy: current.and_then(|spec| spec.strategy.clone()),
        preferred_holder: current.and_then(|spec| spec.preferred_holder.clone()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    #[test]
    fn records_round_trip_through_the_lease_spec() {
        let record = LeaderRecord {
            holder_identity: "node-a".into(),
            lease_duration: Duration::from_secs(15),
            acquire_time: Some(Timestamp::from_microsecond(1_800_000_000_123_456).unwrap()),
            renew_time: Some(Timestamp::from_microsecond(1_800_000_010_654_321).unwrap()),
            leader_transitions: 3,
        };
        let lease = Lease { metadata: ObjectMeta::default(), spec: Some(spec_from_record(&record, None)) };
        assert_eq!(record_from_lease(&lease), record);
    }

    #[test]
    fn the_wire_form_matches_client_go() {
        let record = LeaderRecord {
            holder_identity: "node-a".into(),
            lease_duration: Duration::from_secs(15),
            acquire_time: Some(Timestamp::from_microsecond(1_800_000_000_000_001).unwrap()),
            renew_time: Some(Timestamp::from_microsecond(1_800_000_000_500_000).unwrap()),
            leader_transitions: 0,
        };
        let json = serde_json::to_value(spec_from_record(&record, None)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "holderIdentity": "node-a",
                "leaseDurationSeconds": 15,
                "acquireTime": "2027-01-15T08:00:00.000001Z",
                "renewTime": "2027-01-15T08:00:00.500000Z",
                "leaseTransitions": 0,
            })
        );
    }

    #[test]
    fn a_lease_written_by_client_go_reads_back() {
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "hostpath-csi-k8s-io", "namespace": "default", "resourceVersion": "42"},
            "spec": {
                "holderIdentity": "csi-hostpathplugin-0",
                "leaseDurationSeconds": 15,
                "acquireTime": "2026-11-22T08:00:00.000000Z",
                "renewTime": "2026-11-22T08:05:00.123456Z",
                "leaseTransitions": 4
            }
        }))
        .unwrap();
        let record = record_from_lease(&lease);
        assert_eq!(record.holder_identity, "csi-hostpathplugin-0");
        assert_eq!(record.lease_duration, Duration::from_secs(15));
        assert_eq!(record.leader_transitions, 4);
        assert_eq!(record.renew_time.unwrap().to_string(), "2026-11-22T08:05:00.123456Z");
    }

    #[test]
    fn unmanaged_fields_are_kept_and_an_empty_lease_has_no_holder() {
        let current = LeaseSpec { strategy: Some("OldestEmulationVersion".into()), ..LeaseSpec::default() };
        let spec = spec_from_record(&LeaderRecord::default(), Some(&current));
        assert_eq!(spec.strategy.as_deref(), Some("OldestEmulationVersion"));
        let empty = Lease { metadata: ObjectMeta::default(), spec: None };
        assert_eq!(record_from_lease(&empty).holder_identity, "");
    }
}
