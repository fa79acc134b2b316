//! Recovery from a failed expansion (KEP-1790, "Recover from volume expansion failure"): a claim asks for more than
//! the driver can give, the resizer records the failure in `status.allocatedResourceStatuses`, and the user lowers
//! `spec.resources.requests` to a size the driver can give, which the resizer then expands to.

use csi_sidecars_e2e::wait::wait_for;
use csi_sidecars_e2e::worlds::resizer::{ResizerWorld as World, TIMEOUT};
use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;
use serde_json::json;

const GIB: i64 = 1 << 30;

fn allocated(status: &PersistentVolumeClaimStatus) -> (Option<String>, Option<String>) {
    let size = status.allocated_resources.as_ref().and_then(|r| r.get("storage")).map(|q| q.0.clone());
    let state = status.allocated_resource_statuses.as_ref().and_then(|s| s.get("storage")).cloned();
    (size, state)
}

/// The plugin makes volumes of at most 4Gi. A Block claim of 1Gi asks for 10Gi: the driver answers OUT_OF_RANGE,
/// the claim's resize status is `ControllerResizeInfeasible` with 10Gi allocated, its capacity stays 1Gi and a
/// VolumeResizeFailed event carries the driver's words. The user lowers the request to 2Gi (allowed above the
/// capacity while the expansion has failed): the resizer expands to 2Gi, the status is cleared, 2Gi is allocated
/// and is the claim's, the PV's and the backend volume's size.
#[tokio::test]
async fn lowering_the_request_after_an_infeasible_expansion_recovers() {
    let mut world = World::new("rsz-recover", &["--max-volume-size=4Gi"]).await;
    let volume_id = world.bound_claim("data", true, None).await;
    let _resizer = world.start_resizer("csi-resizer", &[]);

    world.patch_claim("data", json!({"spec": {"resources": {"requests": {"storage": "10Gi"}}}})).await;
    let claims = world.claims();
    let failed = wait_for("the expansion to 10Gi is infeasible", TIMEOUT, || async {
        let status = claims.get("data").await.ok()?.status?;
        let (size, state) = allocated(&status);
        (size.as_deref() == Some("10Gi") && state.as_deref() == Some("ControllerResizeInfeasible")).then_some(status)
    })
    .await;
    assert_eq!(failed.capacity.unwrap()["storage"].0, "1Gi", "nothing was expanded");
    world.wait_for_event("data", "VolumeResizeFailed", "OutOfRange").await;
    assert_eq!(world.backend_volume(&volume_id)["capacity_bytes"], GIB);

    world.patch_claim("data", json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    let recovered = wait_for("the claim expanded to 2Gi", TIMEOUT, || async {
        let status = claims.get("data").await.ok()?.status?;
        let capacity = status.capacity.as_ref()?.get("storage")?.0.clone();
        (capacity == "2Gi").then_some(status)
    })
    .await;
    assert_eq!(allocated(&recovered), (Some("2Gi".to_string()), None), "2Gi allocated, nothing in progress");
    assert_eq!(world.backend_volume(&volume_id)["capacity_bytes"], 2 * GIB);
    let claim = world.claim("data").await;
    let pv = world.pvs().get(claim.spec.unwrap().volume_name.as_deref().unwrap()).await.unwrap();
    assert_eq!(pv.spec.unwrap().capacity.unwrap()["storage"].0, "2Gi");
    world.wait_for_event("data", "VolumeResizeSuccessful", "Resize volume succeeded").await;
}
