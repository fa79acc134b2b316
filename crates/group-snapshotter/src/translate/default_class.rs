//! The class of a dynamic group snapshot that names none: the one VolumeGroupSnapshotClass of its volumes' driver
//! annotated `groupsnapshot.storage.kubernetes.io/is-default-class: "true"` (upstream: external-snapshotter,
//! pkg/common-controller/groupsnapshot_controller_helper.go, `SetDefaultGroupSnapshotClass`).
//!
//! Upstream takes the driver of the first volume it finds; here every selected volume must have the same driver, and
//! a group spanning drivers is refused up front, naming the claims, instead of failing later on the first mismatch.

use sidecar_runtime::events::PlannedEvent;
use snapshot_api::VolumeGroupSnapshotClass;

use super::names::{
    ANN_GROUP_IS_DEFAULT_CLASS, EVENT_CREATE_CONTENT_FAILED, EVENT_GET_CLASS_FAILED, EVENT_SET_DEFAULT_CLASS_FAILED,
};
use super::selection::{Refusal, SelectedVolume};

/// The one CSI driver of the group's volumes.
pub fn group_driver(volumes: &[SelectedVolume]) -> Result<&str, Refusal> {
    let Some(first) = volumes.first() else {
        let message = "the group snapshot selects no volumes";
        return Err(Refusal { events: vec![PlannedEvent::warning(EVENT_CREATE_CONTENT_FAILED, message)] });
    };
    if volumes.iter().all(|v| v.driver == first.driver) {
        return Ok(&first.driver);
    }
    let owners: Vec<String> = volumes.iter().map(|v| format!("PVC {} ({})", v.claim_name, v.driver)).collect();
    let message = format!("the PVCs of the group snapshot belong to more than one CSI driver: {}", owners.join(", "));
    Err(Refusal { events: vec![PlannedEvent::warning(EVENT_CREATE_CONTENT_FAILED, message)] })
}

/// The default class of `driver`; none or several is a warning (both texts are upstream's, which Kubernetes' e2e
/// tests look for).
pub fn default_group_class<'c>(
    classes: &'c [VolumeGroupSnapshotClass],
    driver: &str,
) -> Result<&'c VolumeGroupSnapshotClass, PlannedEvent> {
    let defaults: Vec<&VolumeGroupSnapshotClass> = classes.iter().filter(|c| is_default_for(c, driver)).collect();
    let error = match defaults[..] {
        [class] => return Ok(class),
        [] => format!("cannot find default group snapshot class for driver {driver}"),
        _ => format!("{} default snapshot classes were found", defaults.len()),
    };
    Err(PlannedEvent::warning(
        EVENT_SET_DEFAULT_CLASS_FAILED,
        format!("Failed to set default group snapshot class with error {error}"),
    ))
}

/// The class a group snapshot names does not exist (the text is upstream's, the API server's NotFound).
pub fn class_not_found(name: &str) -> PlannedEvent {
    let message = format!(
        "Failed to get group snapshot class with error volumegroupsnapshotclass.groupsnapshot.storage.k8s.io \"{name}\" not found"
    );
    PlannedEvent::warning(EVENT_GET_CLASS_FAILED, message)
}

fn is_default_for(class: &VolumeGroupSnapshotClass, driver: &str) -> bool {
    let annotation = class.metadata.annotations.as_ref().and_then(|a| a.get(ANN_GROUP_IS_DEFAULT_CLASS));
    annotation.map(String::as_str) == Some("true") && class.spec.driver == driver
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use snapshot_api::DeletionPolicy;
    use snapshot_api::VolumeGroupSnapshotClassFields as Fields;

    use super::*;
    use crate::translate::selection::tests::selected;

    fn class(name: &str, driver: &str, default: Option<&str>) -> VolumeGroupSnapshotClass {
        VolumeGroupSnapshotClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: default.map(|v| BTreeMap::from([(ANN_GROUP_IS_DEFAULT_CLASS.to_string(), v.to_string())])),
                ..Default::default()
            },
            spec: Fields { driver: driver.into(), parameters: None, deletion_policy: DeletionPolicy::Delete },
        }
    }

    #[test]
    fn the_one_default_of_the_driver_is_chosen() {
        let gold = class("gold", "d", Some("true"));
        let other_driver = class("other", "e", Some("true"));
        let not_default = class("silver", "d", Some("false"));
        let capitalised = class("bronze", "d", Some("True"));
        let unannotated = class("plain", "d", None);
        let second = class("gold2", "d", Some("true"));
        // (classes, chosen class or error text)
        let table: [(Vec<&VolumeGroupSnapshotClass>, Result<&str, &str>); 5] = [
            (vec![&gold, &other_driver, &not_default, &unannotated], Ok("gold")),
            (
                vec![&other_driver, &not_default, &capitalised, &unannotated],
                Err("cannot find default group snapshot class for driver d"),
            ),
            (vec![], Err("cannot find default group snapshot class for driver d")),
            (vec![&gold, &second], Err("2 default snapshot classes were found")),
            (vec![&capitalised, &gold], Ok("gold")),
        ];
        for (classes, want) in table {
            let classes: Vec<VolumeGroupSnapshotClass> = classes.into_iter().cloned().collect();
            let got = default_group_class(&classes, "d");
            match want {
                Ok(name) => assert_eq!(got.unwrap().metadata.name.as_deref(), Some(name)),
                Err(text) => assert_eq!(
                    got.unwrap_err(),
                    PlannedEvent::warning(
                        EVENT_SET_DEFAULT_CLASS_FAILED,
                        format!("Failed to set default group snapshot class with error {text}")
                    )
                ),
            }
        }
    }

    #[test]
    fn a_group_has_one_driver() {
        assert_eq!(group_driver(&[selected("a", "d"), selected("b", "d")]), Ok("d"));
        let refusal = group_driver(&[selected("a", "d"), selected("b", "e")]).unwrap_err();
        assert_eq!(
            refusal.events,
            [PlannedEvent::warning(
                EVENT_CREATE_CONTENT_FAILED,
                "the PVCs of the group snapshot belong to more than one CSI driver: PVC a (d), PVC b (e)"
            )]
        );
        assert!(group_driver(&[]).is_err());
    }

    #[test]
    fn a_missing_class_is_named() {
        assert_eq!(
            class_not_found("gold"),
            PlannedEvent::warning(
                "GetGroupSnapshotClassFailed",
                "Failed to get group snapshot class with error volumegroupsnapshotclass.groupsnapshot.storage.k8s.io \"gold\" not found"
            )
        );
    }
}
