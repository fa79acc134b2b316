//! What the provisioner remembers between syncs, in memory only: none of it must survive a restart (what must is in
//! the in-flight journal or on the objects), and losing it costs at most one repeated step.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::own_writes::OwnWrites;
use crate::translate::topology::TopologyPin;

#[derive(Default)]
pub(super) struct Memory {
    /// Per claim UID: what the topology was computed from, so that retries send the same requirements (as upstream's
    /// `InMemoryStore`, external-provisioner pkg/controller/cache.go).
    pins: Mutex<HashMap<String, TopologyPin>>,
    /// Which claim versions the watch shows are our own finalizer writes (see [`OwnWrites`]).
    own_writes: Mutex<OwnWrites>,
    /// `--node-deployment`: per claim UID, the tries at becoming its owner so far (each waits longer).
    ownership_attempts: Mutex<HashMap<String, u32>>,
    /// PVs (by UID) this provisioner deleted whose removal the cache has not shown yet: their watch events must not
    /// repeat the deletion (after a restart one repeat is harmless, DeleteVolume is idempotent).
    deleted_volumes: Mutex<HashSet<String>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Memory {
    pub(super) fn pin(&self, uid: &str) -> TopologyPin {
        locked(&self.pins).get(uid).cloned().unwrap_or_default()
    }

    pub(super) fn keep_pin(&self, uid: &str, pin: TopologyPin) {
        locked(&self.pins).insert(uid.to_string(), pin);
    }

    pub(super) fn forget_pin(&self, uid: &str) {
        locked(&self.pins).remove(uid);
    }

    /// A write of the claim `uid` is about to be sent (see [`OwnWrites::begin`]).
    pub(super) fn own_write_begins(&self, uid: &str) {
        locked(&self.own_writes).begin(uid);
    }

    /// Our write of the claim `uid` returned with `version`; true when the claim changed under us meanwhile.
    pub(super) fn own_write_ends(&self, uid: &str, version: Option<&str>) -> bool {
        locked(&self.own_writes).end(uid, version)
    }

    /// Whether a claim version the watch shows should queue the claim: not when it is our own write.
    pub(super) fn claim_changed(&self, claim: &PersistentVolumeClaim) -> bool {
        let (Some(uid), Some(version)) = (&claim.metadata.uid, &claim.metadata.resource_version) else { return true };
        locked(&self.own_writes).observed(uid, version)
    }

    /// The number of earlier tries at owning the claim `uid`, counting this one.
    pub(super) fn ownership_attempt(&self, uid: &str) -> u32 {
        let mut attempts = locked(&self.ownership_attempts);
        let count = attempts.entry(uid.to_string()).or_default();
        let earlier = *count;
        *count = count.saturating_add(1);
        earlier
    }

    pub(super) fn forget_ownership(&self, uid: &str) {
        locked(&self.ownership_attempts).remove(uid);
    }

    /// The claim `uid` is gone: everything remembered about it goes.
    pub(super) fn claim_gone(&self, uid: &str) {
        self.forget_pin(uid);
        locked(&self.own_writes).forget(uid);
        self.forget_ownership(uid);
    }

    /// This provisioner deleted the PV `uid`.
    pub(super) fn volume_deleted(&self, uid: &str) {
        locked(&self.deleted_volumes).insert(uid.to_string());
    }

    /// Whether this provisioner deleted the PV `uid` and the cache has not shown its removal yet.
    pub(super) fn was_deleted(&self, uid: &str) -> bool {
        locked(&self.deleted_volumes).contains(uid)
    }

    /// The cache shows the PV `uid` removed.
    pub(super) fn volume_gone(&self, uid: &str) {
        locked(&self.deleted_volumes).remove(uid);
    }
}
