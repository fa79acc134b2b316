use std::collections::{BTreeSet, HashMap};

use csi_client::capabilities::{ControllerCapabilities, ControllerCapability, PluginCapabilities, PluginService};
use csi_client::proto::volume_content_source::{SnapshotSource, Type, VolumeSource};
use k8s_openapi::api::core::v1::Secret;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::*;
use crate::translate::refusal::ProvisioningState;
use crate::translate::secrets::credentials;

const DRIVER: &str = "hostpath.csi.k8s.io";
const GROUP: &str = "snapshot.storage.k8s.io";

fn object<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// Every capability a row may need; topology only when asked for.
fn provisioner(topology: bool) -> Provisioner {
    let mut p = Provisioner::new(DRIVER);
    let mut services = BTreeSet::from([PluginService::ControllerService]);
    if topology {
        services.insert(PluginService::VolumeAccessibilityConstraints);
    }
    p.plugin_capabilities = PluginCapabilities { services, ..Default::default() };
    p.controller_capabilities = ControllerCapabilities(
        [
            ControllerCapability::CreateDeleteVolume,
            ControllerCapability::CreateDeleteSnapshot,
            ControllerCapability::CloneVolume,
            ControllerCapability::ModifyVolume,
        ]
        .into(),
    );
    p.features.cross_namespace_volume_data_source = true;
    p
}

/// The claim `apps/data` of class `fast`, with `spec` merged into its spec.
fn claim(spec: Value) -> PersistentVolumeClaim {
    let mut claim = json!({
        "metadata": {"name": "data", "namespace": "apps", "uid": "4f0c"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "fast",
        },
    });
    claim["spec"].as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
    object(claim)
}

fn class(parameters: Value, allowed_zones: &[&str]) -> StorageClass {
    let mut class = json!({"metadata": {"name": "fast"}, "provisioner": DRIVER, "parameters": parameters});
    if !allowed_zones.is_empty() {
        class["allowedTopologies"] = json!([{"matchLabelExpressions": [{"key": "zone", "values": allowed_zones}]}]);
    }
    object(class)
}

fn snapshot_in(namespace: &str) -> Value {
    json!({"dataSourceRef": {"kind": "VolumeSnapshot", "apiGroup": GROUP, "name": "snap", "namespace": namespace}})
}

fn clone_of_src() -> Value {
    json!({"dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}})
}

/// A ready snapshot `namespace/snap` and its content.
fn snapshot(namespace: &str) -> (Option<VolumeSnapshot>, Option<VolumeSnapshotContent>) {
    let snapshot = object(json!({
        "metadata": {"name": "snap", "namespace": namespace, "uid": "snap-uid"},
        "spec": {"source": {"persistentVolumeClaimName": "origin"}},
        "status": {"boundVolumeSnapshotContentName": "content", "readyToUse": true},
    }));
    let content = object(json!({
        "metadata": {"name": "content"},
        "spec": {
            "volumeSnapshotRef": {"name": "snap", "namespace": namespace, "uid": "snap-uid"},
            "deletionPolicy": "Delete",
            "driver": DRIVER,
            "source": {"volumeHandle": "vol-origin"},
        },
        "status": {"snapshotHandle": "snap-handle"},
    }));
    (Some(snapshot), Some(content))
}

/// The bound claim `apps/src` and its PV.
fn clone_source() -> (Option<PersistentVolumeClaim>, Option<PersistentVolume>) {
    let source = object(json!({
        "metadata": {"name": "src", "namespace": "apps", "uid": "src-uid"},
        "spec": {"storageClassName": "fast", "volumeName": "pv-src", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    }));
    let volume = object(json!({
        "metadata": {"name": "pv-src"},
        "spec": {"csi": {"driver": DRIVER, "volumeHandle": "vol-src"}, "claimRef": {"uid": "src-uid"}},
        "status": {"phase": "Bound"},
    }));
    (Some(source), Some(volume))
}

/// A grant in `other` letting claims of `apps` use VolumeSnapshots there.
fn grant() -> ReferenceGrant {
    object(json!({
        "metadata": {"name": "g", "namespace": "other"},
        "spec": {
            "from": [{"group": "", "kind": "PersistentVolumeClaim", "namespace": "apps"}],
            "to": [{"group": GROUP, "kind": "VolumeSnapshot"}],
        },
    }))
}

fn secret_data() -> Credentials {
    credentials(&object::<Secret>(json!({"data": {"token": "c2VjcmV0"}})))
}

fn provisioner_secret() -> Value {
    json!({
        "csi.storage.k8s.io/provisioner-secret-name": "creds",
        "csi.storage.k8s.io/provisioner-secret-namespace": "apps",
    })
}

/// What the cluster holds in one row; each read answers from it.
#[derive(Clone)]
struct World {
    grants: Result<Vec<ReferenceGrant>, String>,
    snapshot: Result<(Option<VolumeSnapshot>, Option<VolumeSnapshotContent>), String>,
    clone_source: (Option<PersistentVolumeClaim>, Option<PersistentVolume>),
    secret: Result<Credentials, String>,
    volume_attributes_class: Result<Option<VolumeAttributesClass>, String>,
}

fn world() -> World {
    World {
        grants: Ok(vec![grant()]),
        snapshot: Ok(snapshot("apps")),
        clone_source: clone_source(),
        secret: Ok(secret_data()),
        volume_attributes_class: Ok(Some(object(json!({
            "metadata": {"name": "gold"}, "driverName": DRIVER, "parameters": {"iops": "300"},
        })))),
    }
}

/// Drives one preparation as the controller does; returns what was read, in order, and the outcome.
fn prepare(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    provisioner: &Provisioner,
    node: Option<&str>,
    world: World,
) -> (Vec<&'static str>, Result<Prepared, Refusal>) {
    let mut reads = Vec::new();
    let outcome = answer_every_read(claim, class, provisioner, node, world, &mut reads);
    (reads, outcome)
}

fn answer_every_read(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    provisioner: &Provisioner,
    node: Option<&str>,
    world: World,
    reads: &mut Vec<&'static str>,
) -> Result<Prepared, Refusal> {
    let mut preparation = Preparation::new(claim, class, provisioner, node)?;
    let mut pin = TopologyPin::default();
    while let Some(read) = preparation.next_read()? {
        match read {
            Read::ReferenceGrants(_) => {
                reads.push("grants");
                preparation.grants(world.grants.clone())?;
            }
            Read::Snapshot(_) => {
                reads.push("snapshot");
                preparation.snapshot(world.snapshot.clone())?;
            }
            Read::CloneSource(_) => {
                reads.push("clone source");
                let (source_claim, source_volume) = &world.clone_source;
                preparation.clone_source(source_claim.as_ref(), source_volume.as_ref())?;
            }
            Read::Topology => {
                reads.push("topology");
                preparation.topology(&[], &[], &mut pin)?;
            }
            Read::Secret(_) => {
                reads.push("secret");
                preparation.secret(world.secret.clone())?;
            }
            Read::VolumeAttributesClass(_) => {
                reads.push("volume attributes class");
                preparation.volume_attributes_class(world.volume_attributes_class.clone())?;
            }
        }
    }
    preparation.request()
}

/// What a row expects: a request (checked by a function) or a refusal (its state and the start of its message).
enum Expect {
    Request(fn(&Prepared) -> bool),
    Refused(ProvisioningState, &'static str),
}
use Expect::{Refused, Request};

fn content_source(prepared: &Prepared) -> Option<&Type> {
    prepared.request.volume_content_source.as_ref()?.r#type.as_ref()
}

/// (rule, claim, class, provisioner with topology, selected node, world, reads, expected)
type Row = (
    &'static str,
    PersistentVolumeClaim,
    StorageClass,
    bool,
    Option<&'static str>,
    World,
    &'static [&'static str],
    Expect,
);

#[test]
fn reads_in_upstream_order_and_only_once_the_rules_before_them_passed() {
    let no_change = ProvisioningState::NoChange;
    let fails = |mut w: World, edit: fn(&mut World)| {
        edit(&mut w);
        w
    };
    let vac = json!({"volumeAttributesClassName": "gold"});
    let bad_stage_secret = json!({
        "csi.storage.k8s.io/provisioner-secret-name": "creds",
        "csi.storage.k8s.io/provisioner-secret-namespace": "apps",
        "csi.storage.k8s.io/node-stage-secret-name": "${pvc.unknown}",
        "csi.storage.k8s.io/node-stage-secret-namespace": "apps",
    });
    let table: Vec<Row> = vec![
        (
            "a claim without source, topology, Secret or VolumeAttributesClass reads nothing",
            claim(json!({})),
            class(json!({}), &[]),
            false,
            None,
            world(),
            &[],
            Request(|p| p.request.secrets.is_empty() && p.request.volume_content_source.is_none()),
        ),
        (
            "a check of the plan refuses before anything is read",
            claim(json!({"selector": {}})),
            class(provisioner_secret(), &[]),
            false,
            None,
            world(),
            &[],
            Refused(ProvisioningState::Finished, "claim Selector is not supported"),
        ),
        (
            "a restore reads the snapshot and sends its handle; the snapshot gets protected",
            claim(snapshot_in("apps")),
            class(json!({}), &[]),
            false,
            None,
            world(),
            &["snapshot"],
            Request(|p| {
                matches!(content_source(p), Some(Type::Snapshot(SnapshotSource { snapshot_id })) if snapshot_id == "snap-handle")
                    && p.snapshot_source.as_ref().is_some_and(|s| s.name == "snap")
                    && p.clone_source.is_none()
            }),
        ),
        (
            "a snapshot that cannot be read leaves the claim waiting, named as its data source",
            claim(snapshot_in("apps")),
            class(provisioner_secret(), &[]),
            false,
            None,
            fails(world(), |w| w.snapshot = Err("connection refused".into())),
            &["snapshot"],
            Refused(
                no_change,
                "error getting handle for DataSource Type VolumeSnapshot by Name snap: error getting snapshot snap from api server: connection refused",
            ),
        ),
        (
            "a clone reads the cached source and sends its volume handle; the source gets protected",
            claim(clone_of_src()),
            class(json!({}), &[]),
            false,
            None,
            world(),
            &["clone source"],
            Request(|p| {
                matches!(content_source(p), Some(Type::Volume(VolumeSource { volume_id })) if volume_id == "vol-src")
                    && p.clone_source.as_ref().is_some_and(|s| s.name == "src")
            }),
        ),
        (
            "a clone source missing from the cache leaves the claim waiting",
            claim(clone_of_src()),
            class(json!({}), &[]),
            false,
            None,
            fails(world(), |w| w.clone_source = (None, None)),
            &["clone source"],
            Refused(
                no_change,
                "error getting handle for DataSource Type PersistentVolumeClaim by Name src: error getting PVC src",
            ),
        ),
        (
            "a source in another namespace needs a ReferenceGrant there, read before the source",
            claim(snapshot_in("other")),
            class(json!({}), &[]),
            false,
            None,
            fails(world(), |w| w.snapshot = Ok(snapshot("other"))),
            &["grants", "snapshot"],
            Request(|p| p.snapshot_source.as_ref().is_some_and(|s| s.namespace == "other")),
        ),
        (
            "without a grant the source is not read",
            claim(snapshot_in("other")),
            class(json!({}), &[]),
            false,
            None,
            fails(world(), |w| w.grants = Ok(vec![])),
            &["grants"],
            Refused(no_change, "accessing other/snap of VolumeSnapshot dataSource from apps/data isn't allowed"),
        ),
        (
            "grants that cannot be listed leave the claim waiting",
            claim(snapshot_in("other")),
            class(json!({}), &[]),
            false,
            None,
            fails(world(), |w| w.grants = Err("forbidden".into())),
            &["grants"],
            Refused(no_change, "error listing ReferenceGrants in namespace other: forbidden"),
        ),
        (
            "the nodes are read when the driver reports VOLUME_ACCESSIBILITY_CONSTRAINTS",
            claim(json!({})),
            class(json!({}), &["z1", "z2"]),
            true,
            None,
            world(),
            &["topology"],
            Request(|p| p.request.accessibility_requirements.as_ref().is_some_and(|t| t.requisite.len() == 2)),
        ),
        (
            "a selected node without its CSINode asks for a reschedule before the Secret is read",
            claim(json!({})),
            class(provisioner_secret(), &[]),
            true,
            Some("node-1"),
            world(),
            &["topology"],
            Refused(ProvisioningState::Reschedule, "failed to get selected CSINode node-1"),
        ),
        (
            "the provisioner Secret is read and sent with CreateVolume",
            claim(json!({})),
            class(provisioner_secret(), &[]),
            false,
            None,
            world(),
            &["secret"],
            Request(|p| {
                p.request.secrets == HashMap::from([("token".to_string(), "secret".to_string())])
                    && p.references.provisioner.as_ref().is_some_and(|s| s.name == "creds")
            }),
        ),
        (
            "a Secret that cannot be read is named, and the VolumeAttributesClass is not read",
            claim(vac.clone()),
            class(provisioner_secret(), &[]),
            false,
            None,
            fails(world(), |w| w.secret = Err("secrets \"creds\" not found".into())),
            &["secret"],
            Refused(no_change, "error getting secret creds in namespace apps: secrets \"creds\" not found"),
        ),
        (
            "another operation's Secret reference is resolved after the provisioner Secret is read",
            claim(vac.clone()),
            class(bad_stage_secret, &[]),
            false,
            None,
            world(),
            &["secret"],
            Refused(no_change, "error resolving value \"${pvc.unknown}\": invalid tokens"),
        ),
        (
            "the claim's VolumeAttributesClass is read and sent as the mutable parameters",
            claim(vac.clone()),
            class(json!({}), &[]),
            false,
            None,
            world(),
            &["volume attributes class"],
            Request(|p| p.request.mutable_parameters == HashMap::from([("iops".to_string(), "300".to_string())])),
        ),
        (
            "a VolumeAttributesClass that cannot be read leaves the claim waiting",
            claim(vac),
            class(json!({}), &[]),
            false,
            None,
            fails(world(), |w| w.volume_attributes_class = Err("timeout".into())),
            &["volume attributes class"],
            Refused(no_change, "timeout"),
        ),
    ];
    for (rule, claim, class, topology, node, world, want_reads, expect) in table {
        let provisioner = provisioner(topology);
        let (reads, outcome) = prepare(&claim, &class, &provisioner, node, world);
        assert_eq!(reads, want_reads, "{rule}: reads");
        match (expect, outcome) {
            (Request(check), Ok(prepared)) => assert!(check(&prepared), "{rule}: {:?}", prepared.request),
            (Refused(state, message), Err(refusal)) => {
                assert_eq!(refusal.state, state, "{rule}: {refusal:?}");
                assert!(refusal.message.starts_with(message), "{rule}: {}", refusal.message);
            }
            (Request(_), Err(refusal)) => panic!("{rule}: refused {refusal:?}"),
            (Refused(..), Ok(prepared)) => panic!("{rule}: prepared {:?}", prepared.request),
        }
    }
}

#[test]
fn deprecated_parameters_are_warned_about() {
    let provisioner = provisioner(false);
    let (claim, class) = (claim(json!({})), class(json!({"fstype": "ext4"}), &[]));
    let preparation = Preparation::new(&claim, &class, &provisioner, None).unwrap();
    assert_eq!(preparation.warnings().len(), 1, "{:?}", preparation.warnings());
}
