//! A Pod as a cache holds it: what the resizer's in-use check reads (external-resizer
//! pkg/controller/inuse_pvc_store.go keeps no more), never the whole Pod.
//!
//! A cluster has more Pods than anything else, and a Pod is large (its spec, every container's, its status), so a
//! Pod cache holds per pod its name, namespace, phase and the claims its `persistentVolumeClaim` volumes name. A
//! reader gets a Pod with those fields only: its volumes named after their claims, no containers, no uid.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodStatus, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Cached, Key};
use crate::watch::strings::{shared_opt, string, text};

#[derive(Debug, Clone, PartialEq)]
pub struct PodClaims {
    name: Option<Box<str>>,
    namespace: Option<Arc<str>>,
    phase: Option<Arc<str>>,
    claims: Box<[Box<str>]>,
}

impl Cached for Pod {
    type Slim = PodClaims;

    fn slim(&self) -> PodClaims {
        let volumes = self.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
        PodClaims {
            name: text(&self.metadata.name),
            namespace: shared_opt(&self.metadata.namespace),
            phase: shared_opt(&self.status.as_ref().and_then(|s| s.phase.clone())),
            claims: volumes
                .iter()
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.as_str().into())
                .collect(),
        }
    }

    fn read(held: &Arc<PodClaims>) -> Arc<Pod> {
        let volumes = held.claims.iter().map(|claim| Volume {
            name: claim.to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.to_string(),
                read_only: None,
            }),
            ..Default::default()
        });
        Arc::new(Pod {
            metadata: ObjectMeta { name: string(&held.name), namespace: string(&held.namespace), ..Default::default() },
            spec: Some(PodSpec { volumes: Some(volumes.collect()), ..Default::default() }),
            status: Some(PodStatus { phase: string(&held.phase), ..Default::default() }),
        })
    }

    fn key(held: &PodClaims) -> Key<'_> {
        Key { namespace: held.namespace.as_deref(), name: held.name.as_deref().unwrap_or_default() }
    }
}
