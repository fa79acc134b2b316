//! The reads before CreateVolume: [`crate::translate::prepare::Preparation`] says what to read next and applies
//! the rules; this file only reads (caches, Secrets, the API) and hands the plain answers back.

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass, VolumeAttributesClass};
use kube::Api;
use kube::api::ListParams;
use sidecar_runtime::api_error::api_error_text;
use sidecar_runtime::watch::{Cache, Cached};
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};

use super::Shared;
use crate::translate::data_source::DataSource;
use crate::translate::prepare::{Preparation, Prepared, Read};
use crate::translate::reference_grant::ReferenceGrant;
use crate::translate::refusal::Refusal;

/// Everything before the call, for `claim` of `class` (in its CSI form) on the selected `node`.
pub(super) async fn prepare(
    shared: &Shared,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
) -> Result<Prepared, Refusal> {
    let mut preparation = Preparation::new(claim, class, &shared.provisioner, node)?;
    for warning in preparation.warnings() {
        tracing::warn!(class = class.metadata.name.as_deref().unwrap_or_default(), "{warning}");
    }
    while let Some(read) = preparation.next_read()? {
        match read {
            Read::ReferenceGrants(namespace) => preparation.grants(reference_grants(shared, &namespace).await)?,
            Read::Snapshot(source) => {
                if let Some(warning) = preparation.snapshot(snapshot_and_content(shared, &source).await)? {
                    tracing::warn!(claim = claim.metadata.name.as_deref().unwrap_or_default(), "{warning}");
                }
            }
            Read::CloneSource(source) => {
                let source_claim = shared.stores.claims.get_in(&source.namespace, &source.name);
                let volume_name = source_claim.as_ref().and_then(|c| c.spec.as_ref()?.volume_name.clone());
                let source_volume = volume_name.and_then(|name| shared.stores.volume(&name));
                preparation.clone_source(source_claim.as_deref(), source_volume.as_deref())?;
            }
            Read::Topology => {
                let (csi_nodes, nodes) = topology_nodes(shared);
                let uid = claim.metadata.uid.as_deref().unwrap_or_default();
                let mut pin = shared.memory.pin(uid);
                let requirements = preparation.topology(&csi_nodes, &nodes, &mut pin);
                shared.memory.keep_pin(uid, pin);
                requirements?;
            }
            Read::Secret(secret) => preparation.secret(shared.read_secret(&secret).await)?,
            Read::VolumeAttributesClass(name) => {
                let read = Api::<VolumeAttributesClass>::all(shared.client.clone()).get_opt(&name).await;
                preparation.volume_attributes_class(read.map_err(|e| api_error_text(&e)))?;
            }
        }
    }
    preparation.request()
}

/// The ReferenceGrants in `namespace` (listed when needed: grants are rare and not cached).
async fn reference_grants(shared: &Shared, namespace: &str) -> Result<Vec<ReferenceGrant>, String> {
    let grants: Api<ReferenceGrant> = Api::namespaced(shared.client.clone(), namespace);
    grants.list(&ListParams::default()).await.map(|list| list.items).map_err(|e| api_error_text(&e))
}

/// The snapshot, and the content it is bound to. Snapshots are read with GETs when a restore needs them rather
/// than watched: most clusters restore rarely, and a cluster-wide cache would cost memory in every provisioner. A
/// content that cannot be read counts as missing (the rules then say the snapshot is not bound).
async fn snapshot_and_content(
    shared: &Shared,
    source: &DataSource,
) -> Result<(Option<VolumeSnapshot>, Option<VolumeSnapshotContent>), String> {
    let snapshot = shared.snapshot(source).await.map_err(|e| api_error_text(&e))?;
    let content_name = snapshot.as_ref().and_then(|s| s.status.as_ref()?.bound_volume_snapshot_content_name.clone());
    let content = match content_name {
        Some(name) => {
            let contents: Api<VolumeSnapshotContent> = Api::all(shared.client.clone());
            contents.get_opt(&name).await.unwrap_or_else(|err| {
                tracing::warn!(content = %name, error = %err, "cannot read the snapshot's content");
                None
            })
        }
        None => None,
    };
    Ok((snapshot, content))
}

/// The nodes the topology is computed from: in node mode this node alone, as NodeGetInfo described it (upstream
/// uses static stand-ins rather than watching, external-provisioner cmd/csi-provisioner/csi-provisioner.go); else
/// the cached CSINodes and Nodes.
fn topology_nodes(shared: &Shared) -> (Vec<CSINode>, Vec<Node>) {
    let p = &shared.provisioner;
    match &p.node_deployment {
        Some(local) => (vec![local.local_csi_node(&p.driver_name)], vec![local.local_node()]),
        None => (cached(&shared.stores.csi_nodes), cached(&shared.stores.nodes)),
    }
}

fn cached<K: Cached>(store: &Option<Cache<K>>) -> Vec<K> {
    store.as_ref().map(|s| s.state().iter().map(|o| (**o).clone()).collect()).unwrap_or_default()
}
