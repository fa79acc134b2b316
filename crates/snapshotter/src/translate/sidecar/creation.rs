//! Cutting a snapshot: the CreateSnapshot request and the annotation written before it (external-snapshotter
//! pkg/sidecar-controller/snapshot_controller.go, createSnapshotWrapper).
//!
//! Everything the request needs is checked before anything is written: a content whose request cannot be built gets
//! no being-created annotation, so it stays deletable. (Upstream writes the annotation before it strips the class
//! parameters; a class with an unknown reserved key then leaves a content that can never be deleted.)

use std::collections::{BTreeMap, HashMap};

use csi_client::proto::CreateSnapshotRequest;
use snapshot_api::names::{
    ANN_VALUE_YES, ANN_VOLUME_SNAPSHOT_BEING_CREATED, PARAM_VOLUME_SNAPSHOT_CONTENT_NAME, PARAM_VOLUME_SNAPSHOT_NAME,
    PARAM_VOLUME_SNAPSHOT_NAMESPACE, RESERVED_PARAMETER_PREFIX, RESERVED_PARAMETERS,
};
use snapshot_api::{VolumeSnapshotClass, VolumeSnapshotContent};

use super::Snapshotter;
use super::content::has_annotation;
use super::patch::ContentPatch;
use super::secrets::{SecretRef, deletion_secret};

/// Why CreateSnapshot cannot be called for a content. The text is shown in the content's status and events.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CreateRefusal {
    #[error("failed to take snapshot {content} without a snapshot class")]
    NoClass { content: String },
    #[error("failed to get snapshot class {class}: not found")]
    ClassNotFound { class: String },
    #[error("content {content} has no volume handle to snapshot")]
    NoVolumeHandle { content: String },
    #[error(
        "failed to remove CSI parameters of prefixed keys: found unknown parameter key {0:?} with reserved namespace {RESERVED_PARAMETER_PREFIX}"
    )]
    UnknownReservedKey(String),
    #[error("cannot create snapshot: content {content} is not bound to a VolumeSnapshot with a UID")]
    MissingSnapshotUid { content: String },
}

/// CreateSnapshot and the Secret whose data goes into its `secrets`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateSnapshotCall {
    /// `secrets` is left empty: the controller fills it from [`CreateSnapshotCall::secret`].
    pub request: CreateSnapshotRequest,
    /// The deletion-secret annotations' reference: the Secret the controller resolved from the class.
    pub secret: Option<SecretRef>,
}

/// What to do to cut (or re-ask about) a snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct CreatePlan {
    /// Written, and successful, before the call; `None` when the annotation is there already. From here until the
    /// driver answers with a snapshot id or a final error, the content cannot be deleted.
    pub mark_being_created: Option<ContentPatch>,
    pub call: CreateSnapshotCall,
}

/// The plan for `content`, whose class (when it names one) is `class` as found in the cache.
pub fn create_plan(
    snapshotter: &Snapshotter,
    content: &VolumeSnapshotContent,
    class: Option<&VolumeSnapshotClass>,
) -> Result<CreatePlan, CreateRefusal> {
    let content_name = content.metadata.name.clone().unwrap_or_default();
    let class = match (&content.spec.volume_snapshot_class_name, class) {
        (None, _) => return Err(CreateRefusal::NoClass { content: content_name }),
        (Some(name), None) => return Err(CreateRefusal::ClassNotFound { class: name.clone() }),
        (Some(_), Some(class)) => class,
    };
    let source_volume_id = content
        .spec
        .source
        .volume_handle
        .clone()
        .ok_or_else(|| CreateRefusal::NoVolumeHandle { content: content_name.clone() })?;
    let mut parameters = create_snapshot_parameters(class.spec.parameters.as_ref())?;
    let reference = &content.spec.volume_snapshot_ref;
    if snapshotter.extra_create_metadata {
        let metadata = [
            (PARAM_VOLUME_SNAPSHOT_NAME, reference.name.clone().unwrap_or_default()),
            (PARAM_VOLUME_SNAPSHOT_NAMESPACE, reference.namespace.clone().unwrap_or_default()),
            (PARAM_VOLUME_SNAPSHOT_CONTENT_NAME, content_name.clone()),
        ];
        parameters.extend(metadata.map(|(key, value)| (key.to_string(), value)));
    }
    let snapshot_uid = reference.uid.as_deref().unwrap_or_default();
    let name = snapshot_name(&snapshotter.snapshot_name_prefix, snapshot_uid, snapshotter.snapshot_name_uuid_length)
        .ok_or(CreateRefusal::MissingSnapshotUid { content: content_name })?;
    let mark_being_created = (!has_annotation(content, ANN_VOLUME_SNAPSHOT_BEING_CREATED))
        .then(|| ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, Some(ANN_VALUE_YES)));
    Ok(CreatePlan {
        mark_being_created,
        call: CreateSnapshotCall {
            request: CreateSnapshotRequest {
                source_volume_id,
                name,
                secrets: HashMap::new(),
                parameters,
                // CSI v1.13's alpha snapshot topology: VolumeSnapshot has no field for it, so none is asked for.
                accessibility_requirements: None,
            },
            secret: deletion_secret(content),
        },
    })
}

/// The class parameters without the reserved keys the sidecars understand; any other `csi.storage.k8s.io/` key is
/// refused, since the driver must never see one.
pub fn create_snapshot_parameters(
    parameters: Option<&BTreeMap<String, String>>,
) -> Result<HashMap<String, String>, CreateRefusal> {
    let mut out = HashMap::new();
    for (key, value) in parameters.into_iter().flatten() {
        if !key.starts_with(RESERVED_PARAMETER_PREFIX) {
            out.insert(key.clone(), value.clone());
        } else if !RESERVED_PARAMETERS.contains(&key.as_str()) {
            return Err(CreateRefusal::UnknownReservedKey(key.clone()));
        }
    }
    Ok(out)
}

/// The CreateSnapshot name, `<prefix>-<uid>`: the whole VolumeSnapshot UID for a negative `uuid_length` (-1), else
/// its first `uuid_length` characters once the dashes are removed. `None` without a UID. The name is the same on
/// every call for the same snapshot, which is what makes CreateSnapshot idempotent.
pub fn snapshot_name(prefix: &str, snapshot_uid: &str, uuid_length: i64) -> Option<String> {
    if snapshot_uid.is_empty() {
        return None;
    }
    let uid = match usize::try_from(uuid_length) {
        Err(_) => snapshot_uid.to_string(),
        Ok(length) => snapshot_uid.chars().filter(|c| *c != '-').take(length).collect(),
    };
    Some(format!("{prefix}-{uid}"))
}

#[cfg(test)]
mod tests {
    use snapshot_api::names::{
        ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME,
        PARAM_SNAPSHOTTER_LIST_SECRET_NAME, PARAM_SNAPSHOTTER_SECRET_NAME, PARAM_SNAPSHOTTER_SECRET_NAMESPACE,
    };

    use super::*;
    use crate::translate::sidecar::fixtures::{SNAPSHOT_UID, annotate, class, content, pre_provisioned, snapshotter};

    #[test]
    fn snapshot_names() {
        // (rule, prefix, uid, --snapshot-name-uuid-length, name)
        let table = [
            ("-1 keeps the whole UID", "snapshot", SNAPSHOT_UID, -1, Some(format!("snapshot-{SNAPSHOT_UID}"))),
            ("N: first N characters without dashes", "snapshot", SNAPSHOT_UID, 10, Some("snapshot-3f1c5e2a6b".into())),
            ("N beyond the UID: all of it without dashes", "s", "ab-cd", 40, Some("s-abcd".into())),
            ("0: the prefix alone", "snapshot", SNAPSHOT_UID, 0, Some("snapshot-".into())),
            ("another prefix", "snap", "u-1", -1, Some("snap-u-1".into())),
            ("no UID: no name", "snapshot", "", -1, None),
        ];
        for (rule, prefix, uid, length, want) in table {
            assert_eq!(snapshot_name(prefix, uid, length), want, "{rule}");
        }
    }

    #[test]
    fn parameters_lose_the_reserved_keys() {
        let params = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let keep = |pairs: &[(&str, &str)]| Ok(params(pairs).into_iter().collect::<HashMap<_, _>>());
        // (rule, class parameters, result)
        type Parameters = Result<HashMap<String, String>, CreateRefusal>;
        let table: [(&str, BTreeMap<String, String>, Parameters); 5] = [
            ("driver parameters pass", params(&[("type", "fast")]), keep(&[("type", "fast")])),
            (
                "secret keys are stripped",
                params(&[
                    ("type", "fast"),
                    (PARAM_SNAPSHOTTER_SECRET_NAME, "s"),
                    (PARAM_SNAPSHOTTER_SECRET_NAMESPACE, "ns"),
                    (PARAM_SNAPSHOTTER_LIST_SECRET_NAME, "l"),
                    (PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME, "g"),
                ]),
                keep(&[("type", "fast")]),
            ),
            (
                "any other reserved key is refused",
                params(&[("csi.storage.k8s.io/fstype", "ext4")]),
                Err(CreateRefusal::UnknownReservedKey("csi.storage.k8s.io/fstype".into())),
            ),
            (
                "the metadata keys are not the class's to give",
                params(&[(PARAM_VOLUME_SNAPSHOT_NAME, "x")]),
                Err(CreateRefusal::UnknownReservedKey(PARAM_VOLUME_SNAPSHOT_NAME.into())),
            ),
            (
                "a look-alike prefix is the driver's",
                params(&[("csi.storage.k8s.io.x", "1")]),
                keep(&[("csi.storage.k8s.io.x", "1")]),
            ),
        ];
        for (rule, parameters, want) in table {
            assert_eq!(create_snapshot_parameters(Some(&parameters)), want, "{rule}");
        }
        assert_eq!(create_snapshot_parameters(None), Ok(HashMap::new()));
    }

    #[test]
    fn create_plans() {
        let mark = Some(ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, Some("yes")));
        let request = |parameters: &[(&str, &str)], name: &str| CreateSnapshotRequest {
            source_volume_id: "vol-1".into(),
            name: name.into(),
            secrets: HashMap::new(),
            parameters: parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            accessibility_requirements: None,
        };
        let plan = |mark: Option<ContentPatch>, request: CreateSnapshotRequest, secret: Option<SecretRef>| {
            Ok(CreatePlan { mark_being_created: mark, call: CreateSnapshotCall { request, secret } })
        };
        let whole_name = format!("snapshot-{SNAPSHOT_UID}");
        let extra = Snapshotter { extra_create_metadata: true, ..snapshotter() };
        let short = Snapshotter { snapshot_name_prefix: "snap".into(), snapshot_name_uuid_length: 8, ..snapshotter() };
        let secret_class = class(&[("type", "fast"), (PARAM_SNAPSHOTTER_SECRET_NAME, "s")]);
        let with_secret =
            annotate(annotate(content(), ANN_DELETION_SECRET_NAME, "s"), ANN_DELETION_SECRET_NAMESPACE, "ns");
        let no_uid = {
            let mut c = content();
            c.spec.volume_snapshot_ref.uid = None;
            c
        };
        let classless = {
            let mut c = content();
            c.spec.volume_snapshot_class_name = None;
            c
        };
        let bad_class = class(&[("csi.storage.k8s.io/unknown", "x")]);
        // (rule, flags, content, class found, plan)
        let table = [
            (
                "annotation first, then the request",
                snapshotter(),
                content(),
                Some(class(&[])),
                plan(mark.clone(), request(&[], &whole_name), None),
            ),
            (
                "annotation there already (polling): not written again",
                snapshotter(),
                annotate(content(), ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes"),
                Some(class(&[])),
                plan(None, request(&[], &whole_name), None),
            ),
            (
                "the secret is the content's annotation reference, class keys stripped",
                snapshotter(),
                with_secret,
                Some(secret_class),
                plan(
                    mark.clone(),
                    request(&[("type", "fast")], &whole_name),
                    Some(SecretRef { namespace: "ns".into(), name: "s".into() }),
                ),
            ),
            (
                "--extra-create-metadata",
                extra,
                content(),
                Some(class(&[])),
                plan(
                    mark.clone(),
                    request(
                        &[
                            (PARAM_VOLUME_SNAPSHOT_NAME, "snap"),
                            (PARAM_VOLUME_SNAPSHOT_NAMESPACE, "default"),
                            (PARAM_VOLUME_SNAPSHOT_CONTENT_NAME, "snapcontent-1"),
                        ],
                        &whole_name,
                    ),
                    None,
                ),
            ),
            (
                "prefix and UID length",
                short,
                content(),
                Some(class(&[])),
                plan(mark, request(&[], "snap-3f1c5e2a"), None),
            ),
            (
                "no class named",
                snapshotter(),
                classless,
                None,
                Err(CreateRefusal::NoClass { content: "snapcontent-1".into() }),
            ),
            (
                "class not found",
                snapshotter(),
                content(),
                None,
                Err(CreateRefusal::ClassNotFound { class: "class".into() }),
            ),
            (
                "unknown reserved key: nothing written",
                snapshotter(),
                content(),
                Some(bad_class),
                Err(CreateRefusal::UnknownReservedKey("csi.storage.k8s.io/unknown".into())),
            ),
            (
                "no VolumeSnapshot UID: nothing written",
                snapshotter(),
                no_uid,
                Some(class(&[])),
                Err(CreateRefusal::MissingSnapshotUid { content: "snapcontent-1".into() }),
            ),
            (
                "no volume handle",
                snapshotter(),
                {
                    let mut c = pre_provisioned();
                    c.spec.volume_snapshot_class_name = Some("class".into());
                    c
                },
                Some(class(&[])),
                Err(CreateRefusal::NoVolumeHandle { content: "snapcontent-1".into() }),
            ),
        ];
        for (rule, flags, content, class, want) in table {
            assert_eq!(create_plan(&flags, &content, class.as_ref()), want, "{rule}");
        }
    }
}
