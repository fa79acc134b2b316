//! How the group loop's writes reach the API server: merge patches of statuses (subresource) and annotations, the
//! group's and the content's finalizers through guarded updates, creations that tolerate AlreadyExists.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use sidecar_runtime::PlannedEvent;
pub use sidecar_runtime::api_error::api_error_text;
use sidecar_runtime::time::now;
use sidecar_runtime::update::set_finalizer;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotStatus};

use super::Shared;
use crate::translate::patch::GroupStatusPatch;
use crate::translate::selection::refusal_message;
use crate::translate::status::refused_status;
use crate::translate::timing::{group_snapshot_type, operations_done, operations_to_start};

pub use sidecar_runtime::api_error::Retry;
pub use sidecar_runtime::update::{create_or_get, delete_by_name};

impl Shared {
    pub(super) fn groups_api(&self, group: &VolumeGroupSnapshot) -> Api<VolumeGroupSnapshot> {
        Api::namespaced(self.client.clone(), &group.namespace().unwrap_or_default())
    }

    /// Writes the group snapshot's status; returns the group snapshot as stored.
    pub(super) async fn write_group_status(
        &self,
        group: &VolumeGroupSnapshot,
        status: &VolumeGroupSnapshotStatus,
    ) -> Result<VolumeGroupSnapshot, kube::Error> {
        let patch = Patch::Merge(GroupStatusPatch { status: status.clone() }.merge_patch());
        self.groups_api(group).patch_status(&group.name_any(), &PatchParams::default(), &patch).await
    }

    /// Starts the clocks of the operations a sync of `group` begins (see [`crate::translate::timing`]).
    pub(super) fn start_operations(&self, group: &VolumeGroupSnapshot, driver: &str) {
        let Some(metrics) = &self.metrics else { return };
        let uid = group.uid().unwrap_or_default();
        for operation in operations_to_start(group) {
            metrics.start(operation, &uid, driver, group_snapshot_type(group));
        }
    }

    /// Stops the clocks of the creation steps the stored group has reached.
    pub(super) fn operations_done(&self, stored: &VolumeGroupSnapshot) {
        let Some(metrics) = &self.metrics else { return };
        let uid = stored.uid().unwrap_or_default();
        for operation in operations_done(&stored.status.clone().unwrap_or_default()) {
            metrics.succeeded(operation, &uid);
        }
    }

    /// Adds or removes a finalizer of any cluster-scoped or namespaced object with a guarded update.
    pub(super) async fn set_finalizer<K>(
        &self,
        api: &Api<K>,
        object: &K,
        finalizer: &str,
        wanted: bool,
    ) -> Result<(), Retry>
    where
        K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        set_finalizer(api, object, finalizer, wanted).await.map(|_| ()).map_err(Retry::from)
    }

    pub(super) async fn record<K: kube::Resource<DynamicType = ()>>(&self, object: &K, event: &PlannedEvent) {
        self.events.record(object, event).await;
    }

    /// Records why the group snapshot cannot go on: each event, and their text as `status.error` (written only when
    /// it changed, see [`refused_status`]). Always a [`Retry`].
    pub(super) async fn refuse(&self, group: &VolumeGroupSnapshot, events: &[PlannedEvent]) -> Retry {
        for event in events {
            self.record(group, event).await;
        }
        let message = refusal_message(events);
        if let Some(status) = refused_status(group, &message, now())
            && let Err(err) = self.write_group_status(group, &status).await
        {
            tracing::warn!(group = %group.name_any(), error = %err, "cannot record the group snapshot's error");
        }
        Retry(message)
    }
}
