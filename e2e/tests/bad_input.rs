//! Bad input across the sidecars: each bad object gets an event that names the problem and is left as it was, the
//! sidecar keeps running, and the well-formed objects of the same run all succeed.

use csi_sidecars_e2e::provisioner_world::ProvisionerWorld as World;

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
