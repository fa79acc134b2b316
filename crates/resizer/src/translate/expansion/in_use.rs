//! Which claims pods keep in use, for drivers that expand only offline (external-resizer
//! pkg/controller/inuse_pvc_store.go).

use k8s_openapi::api::core::v1::Pod;

use crate::translate::names::{POD_FAILED, POD_SUCCEEDED};

/// The claims (`namespace/claimName`) a pod uses through `persistentVolumeClaim` volumes; none once the pod has
/// terminated (phase Succeeded or Failed). Generic ephemeral volumes are not counted, as upstream.
pub fn claims_in_use(pod: &Pod) -> Vec<String> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase == Some(POD_SUCCEEDED) || phase == Some(POD_FAILED) {
        return Vec::new();
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    volumes
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|source| format!("{namespace}/{}", source.claim_name))
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        EphemeralVolumeSource, PersistentVolumeClaimVolumeSource, PodSpec, PodStatus, Volume,
    };

    use super::*;

    fn pod(phase: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("apps".into());
        pod.spec = Some(PodSpec {
            volumes: Some(vec![
                Volume {
                    name: "data".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: "data".into(),
                        read_only: None,
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "scratch".into(),
                    ephemeral: Some(EphemeralVolumeSource::default()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        });
        pod.status = Some(PodStatus { phase: Some(phase.into()), ..Default::default() });
        pod
    }

    #[test]
    fn running_pods_keep_their_claims_in_use() {
        // (rule, phase, claims)
        let table = [
            ("a running pod uses its claims, not its ephemeral volumes", "Running", vec!["apps/data"]),
            ("a pending pod counts too", "Pending", vec!["apps/data"]),
            ("a succeeded pod does not", "Succeeded", vec![]),
            ("a failed pod does not", "Failed", vec![]),
        ];
        for (rule, phase, want) in table {
            assert_eq!(claims_in_use(&pod(phase)), want, "{rule}");
        }
    }
}
