//! csi-provisioner with raw block claims (`volumeMode: Block`) as data sources: a Block volume cloned into a Block
//! claim, and a Filesystem claim refused a Block source.

use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, claim, has_finalizer, plugin_volume_rows};
use k8s_openapi::api::core::v1::TypedLocalObjectReference;

/// A Block claim is provisioned and cloned: the clone is Bound to a Block PV without fsType, made by the driver from
/// the source's volume (the hostpath plugin refuses a clone whose access type is not its source's, so the
/// request asked for a block volume too). A Filesystem claim of the same source is refused with upstream's words
/// and gets nothing from the driver.
#[tokio::test]
async fn a_block_volume_is_cloned_into_a_block_claim() {
    let mut world = World::new("prov-block-clone", &[]).await;
    let class = world.class("block", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("source", &class, Some("Block"), "ReadWriteOnce").await;
    let source_volume = world.bound("source").await;
    let source_handle = world.volumes().get(&source_volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;

    let clone_of_source = |name: &str, mode: &str| {
        let mut copy = claim(name, &class, Some(mode), "ReadWriteOnce");
        copy.spec.as_mut().unwrap().data_source = Some(TypedLocalObjectReference {
            api_group: None,
            kind: "PersistentVolumeClaim".into(),
            name: "source".into(),
        });
        copy
    };
    world.claim_object(clone_of_source("copy", "Block")).await;
    world.claim_object(clone_of_source("as-filesystem", "Filesystem")).await;

    let copy_volume = world.bound("copy").await;
    let copy = world.claims().get("copy").await.unwrap();
    assert_eq!(copy.spec.unwrap().volume_mode.as_deref(), Some("Block"));
    let spec = world.volumes().get(&copy_volume).await.unwrap().spec.unwrap();
    assert_eq!(spec.volume_mode.as_deref(), Some("Block"), "the clone's PV is a block volume");
    let csi = spec.csi.unwrap();
    assert_eq!(csi.fs_type, None, "no fsType on a block volume");
    let rows = plugin_volume_rows(&world.socket);
    let row = rows.iter().find(|r| r["volume_id"] == csi.volume_handle.as_str()).expect("the clone in the plugin");
    assert_eq!(row["content_source"]["volume_id"], source_handle.as_str(), "cloned from the source volume");

    world
        .event(
            "as-filesystem",
            "ProvisioningFailed",
            "the source PVC and destination PVCs must have the same volume mode for cloning. Source is Block. \
             Requested is Filesystem",
        )
        .await;
    assert_eq!(world.plugin_volumes().len(), 2, "nothing made for the refused clone: {rows:?}");
    let source = world.claims().get("source").await.unwrap();
    assert!(
        has_finalizer(&source.metadata, "provisioner.storage.kubernetes.io/cloning-protection"),
        "the source stays protected while a clone of it is pending"
    );
}
