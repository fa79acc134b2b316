use super::*;
use crate::translate::common::fixtures::*;
use crate::translate::common::status_error::Record;

/// (reason, message) of a refusal, or `None` for a content accepted.
fn outcome<T>(result: Result<T, SnapshotFailure>) -> Option<(&'static str, String)> {
    result.err().map(|f| (f.reason, f.message))
}

#[test]
fn preprovisioned_content_checks() {
    let vs = snapshot_of_content("ns", "snap", "uid-1", "c");
    let good = content_for("c", "ns", "snap", "", ContentSourceKind::Snapshot);
    let good_with_uid = content_for("c", "ns", "snap", "uid-1", ContentSourceKind::Snapshot);
    let dynamic = content_for("c", "ns", "snap", "", ContentSourceKind::Volume);
    let other_name = content_for("c", "ns", "other", "", ContentSourceKind::Snapshot);
    let other_namespace = content_for("c", "ns2", "snap", "", ContentSourceKind::Snapshot);
    let other_uid = content_for("c", "ns", "snap", "uid-2", ContentSourceKind::Snapshot);
    let misbound =
        Some(("SnapshotContentMisbound", "VolumeSnapshotContent [c] is bound to a different snapshot".to_string()));
    // (rule, content, refusal)
    let table = [
        ("unbound content naming the snapshot", &good, None),
        ("content bound to this snapshot", &good_with_uid, None),
        (
            "dynamic content",
            &dynamic,
            Some((
                "SnapshotContentMismatch",
                "VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one".to_string(),
            )),
        ),
        ("ref names another snapshot", &other_name, misbound.clone()),
        ("ref in another namespace", &other_namespace, misbound.clone()),
        ("ref bound to another uid", &other_uid, misbound),
    ];
    for (rule, content, want) in table {
        assert_eq!(outcome(preprovisioned_content(&vs, Some(content))), want, "{rule}");
    }
    assert_eq!(preprovisioned_content(&vs, None), Ok(None), "not found is not a refusal by itself");
    let missing = content_missing(&vs);
    assert_eq!(
        (missing.reason, missing.message.as_str()),
        ("SnapshotContentMissing", "VolumeSnapshotContent is missing")
    );
    assert_eq!(missing.error.as_deref(), Some("snapshot ns/snap requests an non-existing content c"));
}

#[test]
fn binding_a_preprovisioned_content() {
    let mut with_class = snapshot_of_content("ns", "snap", "uid-1", "c");
    with_class.spec.volume_snapshot_class_name = Some("gold".into());
    let without_class = snapshot_of_content("ns", "snap", "uid-1", "c");
    let unbound = content_for("c", "ns", "snap", "", ContentSourceKind::Snapshot);
    let mut bound_with_class = content_for("c", "ns", "snap", "uid-1", ContentSourceKind::Snapshot);
    bound_with_class.spec.volume_snapshot_class_name = Some("gold".into());
    let bound_without_class = content_for("c", "ns", "snap", "uid-1", ContentSourceKind::Snapshot);
    let other_uid = content_for("c", "ns", "snap", "uid-2", ContentSourceKind::Snapshot);
    // (rule, snapshot, content, (uid, class) written or nothing)
    let table = [
        ("uid and class written", &with_class, &unbound, Some((Some("uid-1"), Some("gold")))),
        ("no class named: uid only", &without_class, &unbound, Some((Some("uid-1"), None))),
        ("already bound with class: nothing", &with_class, &bound_with_class, None),
        ("bound without class: class written", &with_class, &bound_without_class, Some((Some("uid-1"), Some("gold")))),
    ];
    for (rule, vs, content, want) in table {
        let patch = bind_patch(vs, content).unwrap();
        let got = patch.as_ref().map(|p| (p.snapshot_uid.as_deref(), p.class_name.as_deref()));
        assert_eq!(got, want, "{rule}");
        if let Some(patch) = patch {
            let bound = patch.apply(content);
            assert_eq!(bound.spec.volume_snapshot_ref.uid.as_deref(), Some("uid-1"), "{rule}");
        }
    }
    let refused = bind_patch(&with_class, &other_uid).unwrap_err();
    assert_eq!(refused.reason, "SnapshotBindFailed");
    assert_eq!(
        refused.message,
        "Snapshot failed to bind VolumeSnapshotContent, Could not bind snapshot snap and content c, the VolumeSnapshotRef does not match"
    );
}

#[test]
fn dynamic_content_checks() {
    let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
    let good = content_for("snapcontent-uid-1", "ns", "snap", "uid-1", ContentSourceKind::Volume);
    let preprovisioned = content_for("snapcontent-uid-1", "ns", "snap", "uid-1", ContentSourceKind::Snapshot);
    let mut both_handles = good.clone();
    both_handles.spec.source.snapshot_handle = Some("h".into());
    let no_uid = content_for("snapcontent-uid-1", "ns", "snap", "", ContentSourceKind::Volume);
    let other = content_for("snapcontent-uid-1", "ns", "other", "uid-1", ContentSourceKind::Volume);
    let misbound = Some((
        "SnapshotContentMisbound",
        "VolumeSnapshotContent [snapcontent-uid-1] is bound to a different snapshot".to_string(),
    ));
    // (rule, content, refusal)
    let table = [
        ("our content", &good, None),
        (
            "pre-provisioned under the dynamic name",
            &preprovisioned,
            Some((
                "SnapshotContentMismatch",
                "VolumeSnapshotContent snapcontent-uid-1 is pre-provisioned while expecting a dynamically provisioned one"
                    .to_string(),
            )),
        ),
        (
            "snapshot handle set",
            &both_handles,
            Some(("SnapshotHandleSet", "Snapshot handle should not be set in content ns/snap for dynamic provisioning".to_string())),
        ),
        ("uid must be set", &no_uid, misbound.clone()),
        ("wrong back-pointer", &other, misbound),
    ];
    for (rule, content, want) in table {
        assert_eq!(outcome(dynamic_content(&vs, Some(content))), want, "{rule}");
    }
    assert_eq!(expected_content_name(&vs), "snapcontent-uid-1");
    assert_eq!(expected_content_name(&snapshot_of_content("ns", "snap", "uid-1", "c")), "c");
}

#[test]
fn ready_snapshot_recheck() {
    let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
    let good = content_for("c", "ns", "snap", "uid-1", ContentSourceKind::Volume);
    let other = content_for("c", "ns", "snap", "uid-2", ContentSourceKind::Volume);
    // (rule, content, refusal)
    let table = [
        ("content points back", Some(&good), None),
        ("content gone", None, Some(("SnapshotContentMissing", "VolumeSnapshotContent is missing".to_string()))),
        (
            "content points elsewhere",
            Some(&other),
            Some((
                "SnapshotMisbound",
                "VolumeSnapshotContent is not bound to the VolumeSnapshot correctly".to_string(),
            )),
        ),
    ];
    for (rule, content, want) in table {
        let result = ready_snapshot_check(&vs, content);
        if let Err(failure) = &result {
            assert_eq!(failure.record, Record::StatusError { ready_to_false: true }, "{rule}");
            assert_eq!(failure.error, None, "{rule}: recorded, not retried");
        }
        assert_eq!(outcome(result), want, "{rule}");
    }
}

/// A dynamic snapshot made by the group `group`, with the content its group bound it to (if any) in its status.
fn member(bound: Option<&str>) -> VolumeSnapshot {
    let mut vs = snapshot_of_claim("ns", "member", "uid-m", "data");
    vs.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "groupsnapshot.storage.k8s.io/v1".into(),
        kind: "VolumeGroupSnapshot".into(),
        name: "group".into(),
        uid: "g".into(),
        ..Default::default()
    }]);
    vs.status = bound.map(|name| snapshot_api::VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: Some(name.into()),
        ..Default::default()
    });
    vs
}

/// A snapshot its administrator made for a pre-provisioned group: it names its content and the group owns it.
fn preprovisioned_member() -> VolumeSnapshot {
    let mut vs = snapshot_of_content("ns", "member", "uid-m", "c");
    vs.metadata.owner_references = member(None).metadata.owner_references;
    vs
}

#[test]
fn the_content_that_belongs_to_a_snapshot() {
    // (rule, snapshot, name read from the store)
    let names = [
        ("dynamic: its own content name", snapshot_of_claim("ns", "snap", "uid-1", "data"), Some("snapcontent-uid-1")),
        ("pre-provisioned: the content it names", snapshot_of_content("ns", "snap", "uid-1", "c"), Some("c")),
        ("group member: the content its group bound it to", member(Some("snapcontent-m")), Some("snapcontent-m")),
        ("group member not bound yet: nothing to read", member(None), None),
        ("a pre-provisioned group's member: the content it names", preprovisioned_member(), Some("c")),
    ];
    for (rule, vs, want) in names {
        assert_eq!(content_to_read(&vs).as_deref(), want, "{rule}");
    }

    let dynamic = snapshot_of_claim("ns", "snap", "uid-1", "data");
    let preprovisioned = snapshot_of_content("ns", "snap", "uid-1", "c");
    let own = content_for("snapcontent-uid-1", "ns", "snap", "uid-1", ContentSourceKind::Volume);
    let named = content_for("c", "ns", "snap", "", ContentSourceKind::Snapshot);
    // A member's content points at the member, but is taken as the group bound it without the dynamic checks.
    let members = content_for("snapcontent-m", "ns", "other", "", ContentSourceKind::Volume);
    let mismatch = |text: &str| Some(("SnapshotContentMismatch", text.to_string()));
    // (rule, snapshot, pre-provisioned, content in the store, refusal, accepted)
    let table = [
        ("dynamic, its content", &dynamic, false, Some(&own), None, true),
        ("dynamic, nothing yet", &dynamic, false, None, None, false),
        (
            "dynamic, a pre-provisioned content",
            &dynamic,
            false,
            Some(&named),
            mismatch("VolumeSnapshotContent c is pre-provisioned while expecting a dynamically provisioned one"),
            false,
        ),
        ("pre-provisioned, its content", &preprovisioned, true, Some(&named), None, true),
        ("pre-provisioned, missing: no refusal by itself", &preprovisioned, true, None, None, false),
        (
            "pre-provisioned, a dynamic content",
            &preprovisioned,
            true,
            Some(&own),
            mismatch("VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one"),
            false,
        ),
    ];
    for (rule, vs, preprovisioned, stored, refusal, accepted) in table {
        let result = accepted_content(vs, preprovisioned, stored);
        assert_eq!(result.as_ref().ok().is_some_and(|c| c.is_some()), accepted, "{rule}");
        assert_eq!(outcome(result), refusal, "{rule}");
    }
    let vs = member(Some("snapcontent-m"));
    assert_eq!(accepted_content(&vs, false, Some(&members)), Ok(Some(&members)), "group member: as its group bound it");
    assert_eq!(accepted_content(&vs, false, None), Ok(None), "group member: nothing yet");
}
