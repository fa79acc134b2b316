//! Bad input across the sidecars: each bad object gets an event that names the problem and is left as it was, the
//! sidecar keeps running, and the well-formed objects of the same run all succeed. 42 inputs: 3 claims the driver
//! cannot serve, 20 claims and classes for csi-provisioner, 6 changes for csi-resizer, 8 snapshots and 5 group
//! snapshots for snapshot-controller with csi-snapshotter.

use std::collections::BTreeMap;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::free_port;
use csi_sidecars_e2e::processes::rbac::Sidecar;
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::group::{self, Groups, labelled_claim, plugin_snapshots};
use csi_sidecars_e2e::worlds::provisioner::{
    PROVISIONING_FINALIZER, ProvisionerWorld as World, TIMEOUT, claim, has_finalizer,
};
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use csi_sidecars_e2e::worlds::snapshot::{Snapshots, ready, start_csi_snapshotter, start_snapshot_controller};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, TypedLocalObjectReference, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use serde_json::json;
use snapshot_api::DeletionPolicy;

/// Claims asking for what the driver does not offer: hostpath-plugin's volumes live on one node (no MULTI_NODE_*
/// mode) and, started with `--no-block`, it has no raw block support. The driver refuses each with
/// INVALID_ARGUMENT, which is final: the claim stays Pending with a ProvisioningFailed event quoting the driver.
#[tokio::test]
async fn claims_the_driver_cannot_serve_are_refused_by_name() {
    let mut world = World::new("bad-driver", &["--no-block"]).await;
    let class = world.class("c", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);

    // (claim, volume mode, access mode, text the event must contain)
    let bad = [
        ("many-writers", None, "ReadWriteMany", "access mode MULTI_NODE_MULTI_WRITER is not supported"),
        ("many-readers", None, "ReadOnlyMany", "access mode MULTI_NODE_READER_ONLY is not supported"),
        ("raw", Some("Block"), "ReadWriteOnce", "block volumes are not supported"),
    ];
    for (name, mode, access, _) in bad {
        world.claim(name, &class, mode, access).await;
    }
    world.claim("fine", &class, None, "ReadWriteOnce").await;

    world.bound("fine").await;
    for (name, _, _, text) in bad {
        let event = world.event(name, "ProvisioningFailed", text).await;
        assert_eq!(event.type_.as_deref(), Some("Warning"), "{name}");
        let claim = world.claims().get(name).await.unwrap();
        assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "{name} is left as it was");
    }
    assert_eq!(world.plugin_volumes().len(), 1, "only the well-formed claim got a volume");
    assert_eq!(provisioner.exited(), None, "the provisioner keeps running");
}

/// One bad claim of the provisioner corpus: the class parameters it is provisioned with, how its claim differs from
/// a plain 1Mi ReadWriteOnce one, and text the ProvisioningFailed event must contain.
struct BadClaim {
    name: &'static str,
    parameters: &'static [(&'static str, &'static str)],
    claim: fn(&mut PersistentVolumeClaim),
    event: &'static str,
}

fn plain(_: &mut PersistentVolumeClaim) {}

fn spec(claim: &mut PersistentVolumeClaim) -> &mut PersistentVolumeClaimSpec {
    claim.spec.as_mut().expect("claims are built with a spec")
}

fn size(claim: &mut PersistentVolumeClaim, quantity: &str) {
    let requests = BTreeMap::from([("storage".to_string(), Quantity(quantity.into()))]);
    spec(claim).resources = Some(VolumeResourceRequirements { requests: Some(requests), ..Default::default() });
}

fn data_source(claim: &mut PersistentVolumeClaim, api_group: Option<&str>, kind: &str, name: &str) {
    spec(claim).data_source = Some(TypedLocalObjectReference {
        api_group: api_group.map(String::from),
        kind: kind.into(),
        name: name.into(),
    });
}

const PROVISIONER_CORPUS: &[BadClaim] = &[
    BadClaim {
        name: "unknown-reserved-key",
        parameters: &[("csi.storage.k8s.io/no-such-key", "x")],
        claim: plain,
        event: "found unknown parameter key \"csi.storage.k8s.io/no-such-key\"",
    },
    BadClaim {
        name: "unicode-reserved-key",
        parameters: &[("csi.storage.k8s.io/ключ", "значение")],
        claim: plain,
        event: "found unknown parameter key \"csi.storage.k8s.io/ключ\"",
    },
    BadClaim {
        name: "secret-name-without-namespace",
        parameters: &[("csi.storage.k8s.io/provisioner-secret-name", "creds")],
        claim: plain,
        event: "Both must be specified",
    },
    BadClaim {
        name: "expand-secret-name-only",
        parameters: &[("csi.storage.k8s.io/controller-expand-secret-name", "creds")],
        claim: plain,
        event: "Both must be specified",
    },
    BadClaim {
        name: "node-publish-secret-namespace-only",
        parameters: &[("csi.storage.k8s.io/node-publish-secret-namespace", "${pvc.namespace}")],
        claim: plain,
        event: "Both must be specified",
    },
    BadClaim {
        name: "node-stage-unknown-variable",
        parameters: &[
            ("csi.storage.k8s.io/node-stage-secret-name", "${pvc.nosuch}"),
            ("csi.storage.k8s.io/node-stage-secret-namespace", "${pvc.namespace}"),
        ],
        claim: plain,
        event: "error resolving value \"${pvc.nosuch}\"",
    },
    BadClaim {
        name: "unknown-variable-in-namespace",
        parameters: &[
            ("csi.storage.k8s.io/controller-publish-secret-name", "creds"),
            ("csi.storage.k8s.io/controller-publish-secret-namespace", "${pvc.label}"),
        ],
        claim: plain,
        event: "error resolving value \"${pvc.label}\"",
    },
    BadClaim {
        name: "unknown-template-variable",
        parameters: &[
            ("csi.storage.k8s.io/provisioner-secret-name", "${pvc.nosuch}"),
            ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
        ],
        claim: plain,
        event: "error resolving value \"${pvc.nosuch}\"",
    },
    BadClaim {
        name: "template-resolves-to-bad-name",
        parameters: &[
            ("csi.storage.k8s.io/provisioner-secret-name", "${pvc.annotations['team']}"),
            ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
        ],
        claim: |claim| {
            claim.metadata.annotations = Some(BTreeMap::from([("team".to_string(), "Not_A/Valid name!".to_string())]));
        },
        event: "which is not a valid",
    },
    BadClaim {
        name: "missing-secret",
        parameters: &[
            ("csi.storage.k8s.io/provisioner-secret-name", "missing"),
            ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
        ],
        claim: plain,
        event: "error getting secret missing in namespace",
    },
    BadClaim {
        name: "secret-in-another-namespace",
        parameters: &[
            ("csi.storage.k8s.io/provisioner-secret-name", "creds"),
            ("csi.storage.k8s.io/provisioner-secret-namespace", "kube-public"),
        ],
        claim: plain,
        event: "error getting secret creds in namespace kube-public",
    },
    BadClaim { name: "absurd-size", parameters: &[], claim: |claim| size(claim, "64Pi"), event: "OutOfRange" },
    BadClaim {
        name: "label-selector",
        parameters: &[],
        claim: |claim| {
            let labels = BTreeMap::from([("tier".to_string(), "gold".to_string())]);
            spec(claim).selector = Some(LabelSelector { match_labels: Some(labels), ..Default::default() });
        },
        event: "claim Selector is not supported",
    },
    BadClaim {
        name: "missing-snapshot-source",
        parameters: &[],
        claim: |claim| data_source(claim, Some("snapshot.storage.k8s.io"), "VolumeSnapshot", "no-such-snapshot"),
        event: "no-such-snapshot",
    },
    BadClaim {
        name: "missing-clone-source",
        parameters: &[],
        claim: |claim| data_source(claim, None, "PersistentVolumeClaim", "no-such-claim"),
        event: "error getting PVC no-such-claim",
    },
    BadClaim {
        name: "missing-attributes-class",
        parameters: &[],
        claim: |claim| spec(claim).volume_attributes_class_name = Some("no-such-vac".into()),
        event: "volumeattributesclasses.storage.k8s.io \"no-such-vac\" not found",
    },
];

/// The provisioner corpus: every bad claim gets a ProvisioningFailed event naming its problem and stays Pending
/// with no backend volume; claims that are fine, created between them, are all Bound; the provisioner never exits.
#[tokio::test]
async fn the_provisioner_names_every_bad_claim_and_serves_the_rest() {
    let mut world = World::new("bad-claims", &[]).await;
    install_snapshot_crds(&world.client).await;
    let good = world.class("good", &[], "Delete").await;
    let mut bad = Vec::new();
    for row in PROVISIONER_CORPUS {
        bad.push(world.class(row.name, row.parameters, "Delete").await);
    }
    // "creds" exists in the claims' namespace only: the class that looks for it in kube-public must not find it.
    world.secret("creds", "password", "never-in-an-event").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);

    for (row, class) in PROVISIONER_CORPUS.iter().zip(&bad) {
        let mut object = claim(row.name, class, None, "ReadWriteOnce");
        (row.claim)(&mut object);
        world.claim_object(object).await;
        world.claim(&format!("fine-after-{}", row.name), &good, None, "ReadWriteOnce").await;
    }

    for row in PROVISIONER_CORPUS {
        world.bound(&format!("fine-after-{}", row.name)).await;
    }
    for row in PROVISIONER_CORPUS {
        let event = world.event(row.name, "ProvisioningFailed", row.event).await;
        assert_eq!(event.type_.as_deref(), Some("Warning"), "{}", row.name);
        let message = event.message.unwrap_or_default();
        assert!(!message.contains("never-in-an-event"), "{}: a secret value in an event", row.name);
        let claim = world.claims().get(row.name).await.unwrap();
        assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "{} is left Pending", row.name);
    }
    assert_eq!(world.plugin_volumes().len(), PROVISIONER_CORPUS.len(), "only the fine claims got volumes");
    assert_eq!(provisioner.exited(), None, "the provisioner keeps running");
    assert!(!provisioner.log().contains("never-in-an-event"), "a secret value in the log");
}

/// Claims whose VolumeAttributesClass the driver refuses at creation (a value that is not a number, a 64 KiB value)
/// or that belongs to another driver, and a claim of a StorageClass of another driver: the first three get a
/// ProvisioningFailed event naming the problem, the last is left to its own provisioner (kube-controller-manager's
/// ExternalProvisioning event names it) and untouched by ours; a fine claim between them is Bound.
#[tokio::test]
async fn the_provisioner_names_bad_attribute_classes_and_leaves_other_drivers_claims_alone() {
    let mut world = World::new("bad-vac", &[]).await;
    let good = world.class("good", &[], "Delete").await;
    let huge_value = format!("{}MiB/s", "9".repeat(64 * 1024));
    let classes: Api<VolumeAttributesClass> = Api::all(world.client.clone());
    let attribute_class = |short: &str, driver: &str, key: &str, value: &str| VolumeAttributesClass {
        metadata: ObjectMeta { name: Some(format!("{}-{short}", world.ns())), ..Default::default() },
        driver_name: driver.to_string(),
        parameters: Some(BTreeMap::from([(key.to_string(), value.to_string())])),
    };
    let other_driver = format!("other.{}", world.driver);
    let attribute_classes = [
        attribute_class("letters", &world.driver, "iops", "fast"),
        attribute_class("huge", &world.driver, "throughput", &huge_value),
        attribute_class("elsewhere", &other_driver, "iops", "1000"),
    ];
    for class in &attribute_classes {
        classes.create(&PostParams::default(), class).await.unwrap();
    }
    // A StorageClass of another driver; the world removes it with its own.
    let foreign_class = format!("{}-foreign", world.ns());
    let foreign = StorageClass {
        metadata: ObjectMeta { name: Some(foreign_class.clone()), ..Default::default() },
        provisioner: other_driver.clone(),
        ..Default::default()
    };
    Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &foreign).await.unwrap();
    world.classes.push(foreign_class.clone());
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);

    // (claim, its attributes class, text of the ProvisioningFailed event)
    let not_a_number = format!("{}-letters", world.ns());
    let huge = format!("{}-huge", world.ns());
    let elsewhere = format!("{}-elsewhere", world.ns());
    let refused = [
        ("letters-iops", &not_a_number, "mutable parameter".to_string()),
        ("huge-throughput", &huge, "mutable parameter".to_string()),
        ("class-of-another-driver", &elsewhere, format!("is for driver {other_driver} which does not match")),
    ];
    for (name, class, _) in &refused {
        let mut object = claim(name, &good, None, "ReadWriteOnce");
        spec(&mut object).volume_attributes_class_name = Some(class.to_string());
        world.claim_object(object).await;
    }
    world.claim("of-another-driver", &foreign_class, None, "ReadWriteOnce").await;
    world.claim("fine", &good, None, "ReadWriteOnce").await;

    world.bound("fine").await;
    for (name, _, text) in &refused {
        let event = world.event(name, "ProvisioningFailed", text).await;
        assert!(event.message.unwrap_or_default().len() <= 1024, "{name}: one short event");
        let claim = world.claims().get(name).await.unwrap();
        assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "{name} is left Pending");
    }
    world.event("of-another-driver", "ExternalProvisioning", &format!("'{other_driver}'")).await;
    let untouched = world.claims().get("of-another-driver").await.unwrap();
    assert!(!has_finalizer(&untouched.metadata, PROVISIONING_FINALIZER), "ours wrote nothing on another's claim");
    assert!(world.events_of("of-another-driver").await.iter().all(|e| e.reason.as_deref() != Some("Provisioning")));
    assert_eq!(world.plugin_volumes().len(), 1, "only the fine claim got a volume");
    assert_eq!(provisioner.exited(), None, "the provisioner keeps running");

    for class in &attribute_classes {
        let _ = classes.delete(&class.metadata.name.clone().unwrap(), &DeleteParams::default()).await;
    }
}

/// The resizer corpus: an expansion the driver cannot make, one whose controller-expand secret is missing, a move to
/// an attributes class that does not exist and attributes classes with malformed values (letters, non-ASCII digits,
/// a 64 KiB value) each end in an event naming the problem, the claim's spec is left as the user wrote it, and a
/// good expansion and a good modification in the same run go through.
#[tokio::test]
async fn the_resizer_names_every_bad_change_and_serves_the_rest() {
    let mut world = ResizerWorld::new("bad-changes", &[]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000")]).await;
    let huge_value = format!("{}MiB/s", "9".repeat(64 * 1024));
    let malformed = [
        ("letters-iops", world.create_attribute_class("letters", &[("iops", "fast")]).await),
        ("unicode-iops", world.create_attribute_class("unicode", &[("iops", "١٠٠٠")]).await),
        ("huge-value", world.create_attribute_class("huge", &[("throughput", &huge_value)]).await),
    ];
    let mut resizer = world.start_resizer("csi-resizer", &[]);

    world.bound_claim("too-big", false, None).await;
    world.patch_claim("too-big", json!({"spec": {"resources": {"requests": {"storage": "64Pi"}}}})).await;
    world.expand_secret = Some("missing-expand-secret".into());
    world.bound_claim("no-expand-secret", false, None).await;
    world.expand_secret = None;
    world.patch_claim("no-expand-secret", json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    let missing_class = format!("{}-no-such-class", world.ns());
    world.bound_claim("missing-target-class", false, Some(&silver)).await;
    world.set_attribute_class("missing-target-class", &missing_class).await;
    for (claim, class) in &malformed {
        world.bound_claim(claim, false, Some(&silver)).await;
        world.set_attribute_class(claim, class).await;
    }
    // Block: no node expansion follows, so the claim's capacity is final once the controller has expanded.
    let grown = world.bound_claim("fine-expand", true, None).await;
    world.patch_claim("fine-expand", json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    world.bound_claim("fine-modify", false, Some(&silver)).await;
    world.set_attribute_class("fine-modify", &gold).await;

    world.wait_for_current_class("fine-modify", &gold).await;
    let claims = world.claims();
    eventually("fine-expand at 2Gi", TIMEOUT, || async {
        let status = claims.get("fine-expand").await.ok().and_then(|c| c.status);
        status.and_then(|s| s.capacity).and_then(|c| c.get("storage").cloned()) == Some(Quantity("2Gi".into()))
    })
    .await;
    assert_eq!(world.backend_volume(&grown)["capacity_bytes"], 2i64 << 30);

    world.wait_for_event("too-big", "VolumeResizeFailed", "OutOfRange").await;
    let too_big = world.claim("too-big").await;
    let requested = too_big.spec.and_then(|s| s.resources).and_then(|r| r.requests).unwrap_or_default();
    assert_eq!(requested.get("storage"), Some(&Quantity("64Pi".into())), "the request is left as written");
    let namespace = world.ns().to_string();
    let secret_text = format!("error getting secret missing-expand-secret in namespace {namespace}");
    world.wait_for_event("no-expand-secret", "VolumeResizeFailed", &secret_text).await;
    let unexpanded = world.claim("no-expand-secret").await;
    let capacity = unexpanded.status.and_then(|s| s.capacity).unwrap_or_default();
    assert_eq!(capacity.get("storage"), Some(&Quantity("1Gi".into())), "nothing expanded without the secret");
    world
        .wait_for_event(
            "missing-target-class",
            "VolumeModifyFailed",
            &format!("VAC \"{missing_class}\" does not exist"),
        )
        .await;
    let waiting = world.claim("missing-target-class").await;
    assert_eq!(
        waiting.spec.and_then(|s| s.volume_attributes_class_name),
        Some(missing_class.clone()),
        "left as written"
    );
    let current = waiting.status.and_then(|s| s.current_volume_attributes_class_name);
    assert_eq!(current.as_deref(), Some(silver.as_str()), "the volume keeps its class");
    for (claim, class) in &malformed {
        world.wait_for_modify_status(claim, Some(class), "Infeasible").await;
        world.wait_for_event(claim, "VolumeModifyFailed", "InvalidArgument").await;
        // A driver's error may quote the value whole; the event keeps the start, which names the problem.
        let events = world.events(claim, "VolumeModifyFailed").await;
        for (message, _) in &events {
            assert!(message.len() <= 1024, "{claim}: an event of {} bytes", message.len());
            assert!(message.contains("mutable parameter"), "{claim}: {message}");
        }
        let status = world.claim(claim).await.status.unwrap_or_default();
        assert_eq!(status.current_volume_attributes_class_name.as_deref(), Some(silver.as_str()), "{claim}");
    }
    assert_eq!(resizer.exited(), None, "the resizer keeps running");
}

/// One bad VolumeSnapshot of the snapshot corpus and the event (reason, text) that must name its problem, on the
/// snapshot or, where the sidecar finds it, on its content.
struct BadSnapshot {
    name: &'static str,
    reason: &'static str,
    text: &'static str,
}

/// The snapshot corpus, through snapshot-controller and csi-snapshotter together: every bad snapshot gets an event
/// naming its problem and is not ready, the driver cuts nothing for it, and a good snapshot in the same run is ready.
#[tokio::test]
async fn the_snapshot_sidecars_name_every_bad_snapshot_and_serve_the_rest() {
    let _turn = SNAPSHOT_CONTROLLER.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("bad-snaps", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("data", &storage_class, None, "ReadWriteOnce").await;
    world.bound("data").await;
    // A claim no provisioner serves: it stays Pending.
    world.claim("pending", "no-such-storage-class", None, "ReadWriteOnce").await;

    let mut controller = start_snapshot_controller(&mut world, free_port()).await;
    let mut snapshotter = start_csi_snapshotter(&mut world).await;
    let mut snaps = Snapshots::new(&world);
    let good = snaps.class("good", DeletionPolicy::Delete, false).await;
    let unknown_key = snaps.class_with("unknown-key", &[("csi.storage.k8s.io/no-such-key", "x")]).await;
    let no_secret = snaps
        .class_with(
            "no-secret",
            &[
                ("csi.storage.k8s.io/snapshotter-secret-name", "missing"),
                ("csi.storage.k8s.io/snapshotter-secret-namespace", world.ns()),
            ],
        )
        .await;
    let unknown_handle = snaps.preprovisioned_content("unknown-handle", "unknown-handle", "no-such-handle").await;
    for suffix in ["default-a", "default-b"] {
        snaps.class(suffix, DeletionPolicy::Delete, true).await;
    }

    let corpus = [
        BadSnapshot {
            name: "of-missing-claim",
            reason: "SnapshotContentCreationFailed",
            text: "cannot get claim from snapshot: persistentvolumeclaims \"no-such-claim\" not found",
        },
        BadSnapshot {
            name: "of-pending-claim",
            reason: "SnapshotContentCreationFailed",
            text: "the PVC pending is not yet bound to a PV",
        },
        BadSnapshot {
            name: "missing-class",
            reason: "GetSnapshotClassFailed",
            text: "volumesnapshotclass.snapshot.storage.k8s.io \"no-such-snapshot-class\" not found",
        },
        BadSnapshot {
            name: "unknown-key",
            reason: "SnapshotCreationFailed",
            text: "found unknown parameter key \"csi.storage.k8s.io/no-such-key\"",
        },
        BadSnapshot { name: "no-secret", reason: "SnapshotCreationFailed", text: "error getting secret missing" },
        BadSnapshot {
            name: "missing-content",
            reason: "SnapshotContentMissing",
            text: "VolumeSnapshotContent is missing",
        },
        BadSnapshot { name: "unknown-handle", reason: "SnapshotContentCheckandUpdateFailed", text: "no-such-handle" },
        BadSnapshot {
            name: "two-default-classes",
            reason: "SetDefaultSnapshotClassFailed",
            text: "2 default snapshot classes were found",
        },
    ];
    snaps.snapshot_of_claim("of-missing-claim", "no-such-claim", Some(&good)).await;
    snaps.snapshot_of_claim("of-pending-claim", "pending", Some(&good)).await;
    snaps.snapshot_of_claim("missing-class", "data", Some("no-such-snapshot-class")).await;
    snaps.snapshot_of_content("unknown-handle", &unknown_handle).await;
    snaps.snapshot_of_claim("unknown-key", "data", Some(&unknown_key)).await;
    snaps.snapshot_of_claim("no-secret", "data", Some(&no_secret)).await;
    snaps.snapshot_of_content("missing-content", "no-such-content").await;
    snaps.snapshot_of_claim("two-default-classes", "data", None).await;
    snaps.snapshot_of_claim("fine", "data", Some(&good)).await;

    snaps.wait_snapshot("fine", "ready", ready).await;
    for row in &corpus {
        snaps.wait_event(row.name, row.reason, row.text).await;
        let snapshot = snaps.snapshots().get(row.name).await.unwrap();
        assert!(!ready(&snapshot), "{} is not ready", row.name);
    }
    let two = snaps.snapshots().get("two-default-classes").await.unwrap();
    assert_eq!(two.spec.volume_snapshot_class_name, None, "no class is chosen for the user");
    assert_eq!(plugin_snapshot_count(&world), 1, "the driver cut only the good snapshot");
    assert_eq!(controller.0.exited(), None, "snapshot-controller keeps running");
    assert_eq!(snapshotter.0.exited(), None, "csi-snapshotter keeps running");
}

/// The group corpus, through snapshot-controller and csi-snapshotter with group snapshots on: a selector that
/// matches no claim, a selector that is not one, a member claim that is not bound, a class that does not exist and
/// a pre-provisioned content that does not exist each get an event naming the problem on the group, which is not
/// ready and gets no content from the driver; a good group in the same run is ready.
#[tokio::test]
async fn the_snapshot_sidecars_name_every_bad_group_snapshot_and_serve_the_rest() {
    let _turn = SNAPSHOT_CONTROLLER.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("bad-groups", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    labelled_claim(&world, "db", &storage_class, &[("app", "db")]).await;
    world.bound("db").await;
    // A claim no provisioner serves: it stays Pending.
    labelled_claim(&world, "stuck", "no-such-storage-class", &[("app", "stuck")]).await;
    let mut controller = group::start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let mut snapshotter = group::start(&mut world, Sidecar::Snapshotter, "csi-snapshotter").await;
    let groups = Groups::default_class(&world).await;

    // (group, its spec, the event's reason and text)
    let corpus = [
        (
            "selects-nothing",
            json!({"source": {"selector": {"matchLabels": {"app": "nothing"}}}}),
            "GroupSnapshotContentCreationFailed",
            "label selector app=nothing for group snapshot not applied to any PVC",
        ),
        (
            "not-a-selector",
            json!({"source": {"selector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["db"]}]}}}),
            "GroupSnapshotContentCreationFailed",
            "invalid label selector",
        ),
        (
            "unbound-member",
            json!({"source": {"selector": {"matchLabels": {"app": "stuck"}}}}),
            "GroupSnapshotContentCreationFailed",
            "the PVC stuck is not yet bound to a PV",
        ),
        (
            "missing-class",
            json!({"source": {"selector": {"matchLabels": {"app": "db"}}}, "volumeGroupSnapshotClassName": "no-such-group-class"}),
            "GetGroupSnapshotClassFailed",
            "\"no-such-group-class\" not found",
        ),
        (
            "missing-content",
            json!({"source": {"volumeGroupSnapshotContentName": "no-such-group-content"}}),
            "GroupSnapshotContentMissing",
            "no-such-group-content",
        ),
    ];
    for (name, spec, _, _) in &corpus {
        groups.create(name, spec.clone()).await;
    }
    groups.group("fine", json!({"matchLabels": {"app": "db"}})).await;

    groups.ready("fine").await;
    let snaps = Snapshots::new(&world);
    for (name, _, reason, text) in &corpus {
        snaps.wait_event(name, reason, text).await;
        let group = groups.groups().get(name).await.unwrap();
        let ready = group.status.as_ref().and_then(|s| s.ready_to_use);
        assert_ne!(ready, Some(true), "{name} is not ready");
    }
    let cut = plugin_snapshots(&world);
    assert_eq!(cut.len(), 1, "the driver cut only the good group's one member: {cut:?}");
    assert_ne!(cut[0]["group_snapshot_id"].as_str().unwrap_or_default(), "", "{cut:?}");
    assert_eq!(controller.0.exited(), None, "snapshot-controller keeps running");
    assert_eq!(snapshotter.0.exited(), None, "csi-snapshotter keeps running");
}

/// snapshot-controller watches every namespace: one test of this file runs one at a time.
static SNAPSHOT_CONTROLLER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn plugin_snapshot_count(world: &World) -> usize {
    world.csictl(&["list-snapshots"]).as_array().map(Vec::len).unwrap_or_default()
}
