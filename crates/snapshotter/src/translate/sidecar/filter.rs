//! Which VolumeSnapshotContents the sidecar handles, and which of their update events start a sync (reference §3.2,
//! first paragraph).
//!
//! Most updates of a content are the sidecar's own writes (status, the being-created annotation) or the
//! snapshot-controller's finalizer: syncing on each of them would call the driver again at once instead of after the
//! queue's backoff (#1009). Two kinds of update must get through nevertheless: the informer's resync (the same
//! resourceVersion twice), which is what keeps a not-ready content polled; and readyToUse turning true, because a
//! deletion that waited for the being-created annotation can proceed only then (#1392).

use snapshot_api::names::{ANN_VOLUME_SNAPSHOT_BEING_CREATED, LABEL_MANAGED_BY};
use snapshot_api::{VolumeSnapshotClass, VolumeSnapshotContent};

/// Whether the sidecar of `driver_name` handles `content`: it has a source, names this driver, and the class it names,
/// when known, is this driver's too. A class that is named but not (yet) known does not exclude the content.
pub fn handles_content(
    content: &VolumeSnapshotContent,
    class: Option<&VolumeSnapshotClass>,
    driver_name: &str,
) -> bool {
    let source = &content.spec.source;
    let has_source = source.volume_handle.is_some() || source.snapshot_handle.is_some();
    let class_matches = match (&content.spec.volume_snapshot_class_name, class) {
        (Some(_), Some(class)) => class.spec.driver == driver_name,
        _ => true,
    };
    has_source && content.spec.driver == driver_name && class_matches
}

/// With `--node-deployment`, the label selector of the content watch: only the contents the snapshot-controller
/// labelled with this node (distributed snapshotting).
pub fn node_label_selector(node_name: &str) -> String {
    format!("{LABEL_MANAGED_BY}={node_name}")
}

/// Whether an update from `old` to `new` is worth a sync.
pub fn update_needs_sync(old: &VolumeSnapshotContent, new: &VolumeSnapshotContent) -> bool {
    if old.metadata.resource_version == new.metadata.resource_version {
        return true;
    }
    if !is_ready(old) && is_ready(new) {
        return true;
    }
    without_ignored_fields(old) != without_ignored_fields(new)
}

fn is_ready(content: &VolumeSnapshotContent) -> bool {
    content.status.as_ref().and_then(|s| s.ready_to_use) == Some(true)
}

/// The content without what changes on every write of the sidecar and the controller.
fn without_ignored_fields(content: &VolumeSnapshotContent) -> VolumeSnapshotContent {
    let mut content = content.clone();
    content.status = None;
    content.metadata.finalizers = None;
    content.metadata.managed_fields = None;
    content.metadata.resource_version = None;
    if let Some(annotations) = content.metadata.annotations.as_mut() {
        annotations.remove(ANN_VOLUME_SNAPSHOT_BEING_CREATED);
        if annotations.is_empty() {
            content.metadata.annotations = None;
        }
    }
    content
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
    use k8s_openapi::jiff::Timestamp;
    use snapshot_api::names::ANN_VOLUME_SNAPSHOT_BEING_DELETED;
    use snapshot_api::{VolumeSnapshotContentSource, VolumeSnapshotContentStatus};

    use super::*;
    use crate::translate::sidecar::fixtures::{DRIVER, annotate, class, content};

    #[test]
    fn contents_of_this_driver() {
        let other_class = {
            let mut c = class(&[]);
            c.spec.driver = "other.csi".into();
            c
        };
        let no_source = {
            let mut c = content();
            c.spec.source = VolumeSnapshotContentSource::default();
            c
        };
        let other_driver = {
            let mut c = content();
            c.spec.driver = "other.csi".into();
            c
        };
        let classless = {
            let mut c = content();
            c.spec.volume_snapshot_class_name = None;
            c
        };
        // (rule, content, class as found, handled)
        let table = [
            ("ours, class known", content(), Some(class(&[])), true),
            ("ours, class named but not known yet", content(), None, true),
            ("no class named: the class found does not matter", classless, Some(other_class.clone()), true),
            ("the class belongs to another driver", content(), Some(other_class), false),
            ("another driver", other_driver, Some(class(&[])), false),
            ("no source at all", no_source, Some(class(&[])), false),
        ];
        for (rule, content, class, want) in table {
            assert_eq!(handles_content(&content, class.as_ref(), DRIVER), want, "{rule}");
        }
    }

    #[test]
    fn node_deployment_watches_its_node_only() {
        assert_eq!(node_label_selector("node-1"), "snapshot.storage.kubernetes.io/managed-by=node-1");
    }

    #[test]
    fn update_events_worth_a_sync() {
        let old = content();
        fn newer(change: impl FnOnce(&mut VolumeSnapshotContent)) -> VolumeSnapshotContent {
            let mut c = content();
            c.metadata.resource_version = Some("8".into());
            change(&mut c);
            c
        }
        fn ready(ready: bool) -> VolumeSnapshotContentStatus {
            VolumeSnapshotContentStatus { ready_to_use: Some(ready), ..Default::default() }
        }
        let not_ready_old = {
            let mut c = content();
            c.status = Some(ready(false));
            c
        };
        let ready_old = {
            let mut c = content();
            c.status = Some(ready(true));
            c
        };
        let resync = old.clone();
        // (rule, old, new, sync)
        let table = [
            ("resync: the same resourceVersion", old.clone(), resync, true),
            ("only the resourceVersion changed", old.clone(), newer(|_| {}), false),
            ("only the status changed", not_ready_old.clone(), newer(|c| c.status = Some(ready(false))), false),
            ("readyToUse false to true", not_ready_old, newer(|c| c.status = Some(ready(true))), true),
            ("readyToUse unset to true", old.clone(), newer(|c| c.status = Some(ready(true))), true),
            ("ready stays ready", ready_old, newer(|c| c.status = Some(ready(true))), false),
            (
                "only the finalizers changed",
                old.clone(),
                newer(|c| c.metadata.finalizers = Some(vec!["f".into()])),
                false,
            ),
            (
                "only managedFields changed",
                old.clone(),
                newer(|c| c.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()])),
                false,
            ),
            (
                "only the being-created annotation changed",
                old.clone(),
                newer(|c| *c = annotate(c.clone(), ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes")),
                false,
            ),
            (
                "the being-deleted annotation appeared",
                old.clone(),
                newer(|c| *c = annotate(c.clone(), ANN_VOLUME_SNAPSHOT_BEING_DELETED, "yes")),
                true,
            ),
            (
                "a deletionTimestamp appeared",
                old.clone(),
                newer(|c| c.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH))),
                true,
            ),
            ("the spec changed", old.clone(), newer(|c| c.spec.volume_snapshot_ref.uid = Some("u2".into())), true),
            ("a label changed", old, newer(|c| c.metadata.labels = Some([("a".into(), "b".into())].into())), true),
        ];
        for (rule, old, new, want) in table {
            assert_eq!(update_needs_sync(&old, &new), want, "{rule}");
        }
    }
}
