//! Which VolumeSnapshotContents the sidecar handles, and which of their update events start a sync
//! (external-snapshotter pkg/sidecar-controller/snapshot_controller_base.go, isDriverMatch; pkg/utils/util.go,
//! ShouldEnqueueContentChange).
//!
//! Most updates of a content are the sidecar's own writes (status, the being-created annotation) or the
//! snapshot-controller's finalizer: syncing on each of them would call the driver again at once instead of after the
//! queue's backoff (#1009). Two kinds of update must get through nevertheless: the informer's resync (the same
//! resourceVersion twice), which is what keeps a not-ready content polled; and readyToUse turning true, because a
//! deletion that waited for the being-created annotation can proceed only then (#1392).

use snapshot_api::names::{ANN_VOLUME_SNAPSHOT_BEING_CREATED, LABEL_MANAGED_BY};
use snapshot_api::{VolumeSnapshotClass, VolumeSnapshotContent};

use super::content::content_name;

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

/// Whether a change of a content from `old` (`None`: new to the cache) to `new` is worth a sync. A content new to
/// the cache always is.
pub fn change_needs_sync(old: Option<&VolumeSnapshotContent>, new: &VolumeSnapshotContent) -> bool {
    let Some(old) = old else { return true };
    if old.metadata.resource_version == new.metadata.resource_version {
        return true;
    }
    if !is_ready(old) && is_ready(new) {
        return true;
    }
    without_ignored_fields(old) != without_ignored_fields(new)
}

/// The contents (names) to sync at once when `class` is added or changed: those that name it and are not ready. A
/// content whose class was not cached yet (its CreateSnapshot was refused with "not found") goes on when it appears,
/// instead of at its next backoff step.
pub fn contents_woken_by_class<'a>(
    class: &VolumeSnapshotClass,
    contents: impl IntoIterator<Item = &'a VolumeSnapshotContent>,
) -> Vec<String> {
    let name = class.metadata.name.as_deref().unwrap_or_default();
    contents
        .into_iter()
        .filter(|content| content.spec.volume_snapshot_class_name.as_deref() == Some(name) && !is_ready(content))
        .map(content_name)
        .collect()
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
            ("new to the cache", None, old.clone(), true),
            ("resync: the same resourceVersion", Some(old.clone()), resync, true),
            ("only the resourceVersion changed", Some(old.clone()), newer(|_| {}), false),
            ("only the status changed", Some(not_ready_old.clone()), newer(|c| c.status = Some(ready(false))), false),
            ("readyToUse false to true", Some(not_ready_old), newer(|c| c.status = Some(ready(true))), true),
            ("readyToUse unset to true", Some(old.clone()), newer(|c| c.status = Some(ready(true))), true),
            ("ready stays ready", Some(ready_old), newer(|c| c.status = Some(ready(true))), false),
            (
                "only the finalizers changed",
                Some(old.clone()),
                newer(|c| c.metadata.finalizers = Some(vec!["f".into()])),
                false,
            ),
            (
                "only managedFields changed",
                Some(old.clone()),
                newer(|c| c.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()])),
                false,
            ),
            (
                "only the being-created annotation changed",
                Some(old.clone()),
                newer(|c| *c = annotate(c.clone(), ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes")),
                false,
            ),
            (
                "the being-deleted annotation appeared",
                Some(old.clone()),
                newer(|c| *c = annotate(c.clone(), ANN_VOLUME_SNAPSHOT_BEING_DELETED, "yes")),
                true,
            ),
            (
                "a deletionTimestamp appeared",
                Some(old.clone()),
                newer(|c| c.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH))),
                true,
            ),
            (
                "the spec changed",
                Some(old.clone()),
                newer(|c| c.spec.volume_snapshot_ref.uid = Some("u2".into())),
                true,
            ),
            (
                "a label changed",
                Some(old),
                newer(|c| c.metadata.labels = Some([("a".into(), "b".into())].into())),
                true,
            ),
        ];
        for (rule, old, new, want) in table {
            assert_eq!(change_needs_sync(old.as_ref(), &new), want, "{rule}");
        }
    }

    #[test]
    fn a_class_wakes_the_contents_waiting_for_it() {
        fn named(name: &str, class: Option<&str>, ready: Option<bool>) -> VolumeSnapshotContent {
            let mut c = content();
            c.metadata.name = Some(name.into());
            c.spec.volume_snapshot_class_name = class.map(Into::into);
            c.status = ready.map(|r| VolumeSnapshotContentStatus { ready_to_use: Some(r), ..Default::default() });
            c
        }
        // (rule, content, woken by the class `class`)
        let table = [
            ("names the class, no status yet", named("a", Some("class"), None), true),
            ("names the class, not ready", named("b", Some("class"), Some(false)), true),
            ("names the class, ready: nothing to wait for", named("c", Some("class"), Some(true)), false),
            ("names another class", named("d", Some("other"), None), false),
            ("names no class", named("e", None, None), false),
        ];
        let contents: Vec<_> = table.iter().map(|(_, content, _)| content.clone()).collect();
        let want: Vec<String> =
            table.iter().filter(|(_, _, woken)| *woken).map(|(_, c, _)| c.metadata.name.clone().unwrap()).collect();
        assert_eq!(contents_woken_by_class(&class(&[]), &contents), want);
        for (rule, content, woken) in &table {
            assert_eq!(!contents_woken_by_class(&class(&[]), [content]).is_empty(), *woken, "{rule}");
        }
    }
}
