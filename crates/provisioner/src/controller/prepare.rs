//! Everything a provisioning attempt reads and computes before CreateVolume: the plan, the content source, the
//! topology, the secrets, the VolumeAttributesClass, the request.

use csi_client::proto::{CreateVolumeRequest, TopologyRequirement};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use kube::Api;
use kube::api::ListParams;
use kube::runtime::reflector::ObjectRef;

use super::Shared;
use super::provision::api_error_text;
use crate::translate::api_errors::{data_source_refusal, grants_not_listed};
use crate::translate::clone_source::clone_content_source;
use crate::translate::create_volume::{CreateVolumePlan, ResolvedInputs, create_volume_plan, create_volume_request};
use crate::translate::data_source::{ContentKind, DataSource, claim_data_source};
use crate::translate::parameters::deprecation_warnings;
use crate::translate::reference_grant::{ReferenceGrant, check_grant, needs_grant};
use crate::translate::refusal::Refusal;
use crate::translate::secrets::{
    Credentials, SecretKind, SecretRef, SecretReferences, credentials, secret_read_failure, secret_reference,
    secret_references,
};
use crate::translate::topology::{TopologyInput, accessibility_requirements};

/// A request ready to send, and what else the attempt needs afterwards.
pub(super) struct Prepared {
    pub(super) plan: CreateVolumePlan,
    pub(super) request: CreateVolumeRequest,
    pub(super) credentials: Credentials,
    pub(super) references: SecretReferences,
    /// The claim being cloned, which gets the clone-protection finalizer before the call.
    pub(super) clone_source: Option<DataSource>,
    /// The VolumeSnapshot being restored, which gets the source-protection finalizer before the call.
    pub(super) snapshot_source: Option<DataSource>,
}

pub(super) fn cached<K: kube::Resource<DynamicType = ()> + Clone>(
    store: &Option<kube::runtime::reflector::Store<K>>,
) -> Vec<K> {
    store.as_ref().map(|s| s.state().iter().map(|o| (**o).clone()).collect()).unwrap_or_default()
}

impl Shared {
    /// Everything before the call: plan, content source, topology, secrets, VolumeAttributesClass, request.
    pub(super) async fn prepare(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<&str>,
    ) -> Result<Prepared, Refusal> {
        let p = &self.provisioner;
        let source = claim_data_source(claim, p.features.cross_namespace_volume_data_source)?;
        let plan = create_volume_plan(claim, class, p, source.as_ref())?;
        for warning in deprecation_warnings(class.parameters.as_ref().unwrap_or(&Default::default())) {
            tracing::warn!(class = class.metadata.name.as_deref().unwrap_or_default(), "{warning}");
        }
        if let Some((_, source)) = &plan.content {
            self.check_cross_namespace_grant(claim, source).await?;
        }
        let (mut clone_source, mut snapshot_source) = (None, None);
        let volume_content_source = match &plan.content {
            None => None,
            Some((ContentKind::Snapshot, source)) => {
                let restore = self
                    .snapshot_restore(claim, source, &class.provisioner)
                    .await
                    .map_err(|r| data_source_refusal(r, source))?;
                snapshot_source = Some(source.clone());
                Some(restore.content_source)
            }
            Some((ContentKind::Clone, source)) => {
                let source_claim = self.stores.claims.get(&ObjectRef::new(&source.name).within(&source.namespace));
                let source_volume_name = source_claim.as_ref().and_then(|c| c.spec.as_ref()?.volume_name.clone());
                let source_volume = source_volume_name.and_then(|name| self.stores.volume(&name));
                let content = clone_content_source(
                    claim,
                    source,
                    source_claim.as_deref(),
                    source_volume.as_deref(),
                    &class.provisioner,
                )
                .map_err(|r| data_source_refusal(r, source))?;
                clone_source = Some(source.clone());
                Some(content)
            }
        };
        let accessibility_requirements = if p.supports_topology() { self.topology(claim, class, node)? } else { None };

        let parameters = class.parameters.clone().unwrap_or_default();
        let secret = secret_reference(SecretKind::Provisioner, &parameters, &plan.volume_name, Some(claim))?;
        let credentials = match &secret {
            Some(secret) => self.read_secret(secret).await.map_err(|e| secret_read_failure(secret, &e))?,
            None => Credentials::default(),
        };
        let references = secret_references(&parameters, &plan.volume_name, Some(claim))?;

        let vac = match &plan.volume_attributes_class {
            Some(name) => Api::<VolumeAttributesClass>::all(self.client.clone())
                .get_opt(name)
                .await
                .map_err(|e| Refusal::no_change(api_error_text(&e)))?,
            None => None,
        };
        let resolved = ResolvedInputs {
            credentials: credentials.clone(),
            volume_content_source,
            accessibility_requirements,
            volume_attributes_class: vac.as_ref(),
        };
        let request = create_volume_request(&plan, claim, class, p, resolved)?;
        Ok(Prepared { plan, request, credentials, references, clone_source, snapshot_source })
    }

    /// A source in another namespace needs a ReferenceGrant there (item 57).
    pub(super) async fn check_cross_namespace_grant(
        &self,
        claim: &PersistentVolumeClaim,
        source: &DataSource,
    ) -> Result<(), Refusal> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        if !needs_grant(namespace, source) {
            return Ok(());
        }
        let grants: Api<ReferenceGrant> = Api::namespaced(self.client.clone(), &source.namespace);
        let grants = grants
            .list(&ListParams::default())
            .await
            .map_err(|e| grants_not_listed(&source.namespace, &api_error_text(&e)))?;
        check_grant(namespace, claim.metadata.name.as_deref().unwrap_or_default(), source, grants.items.iter())
    }

    pub(super) fn topology(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<&str>,
    ) -> Result<Option<TopologyRequirement>, Refusal> {
        let (csi_nodes, nodes) = match &self.provisioner.node_deployment {
            Some(local) => (vec![local.local_csi_node(&self.provisioner.driver_name)], vec![local.local_node()]),
            None => (cached(&self.stores.csi_nodes), cached(&self.stores.nodes)),
        };
        let input = TopologyInput {
            driver_name: &self.provisioner.driver_name,
            claim_name: claim.metadata.name.as_deref().unwrap_or_default(),
            allowed_topologies: class.allowed_topologies.as_deref().unwrap_or_default(),
            selected_node: node,
            strict_topology: self.provisioner.strict_topology,
            immediate_topology: self.provisioner.immediate_topology,
            csi_nodes: &csi_nodes,
            nodes: &nodes,
        };
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        let mut pin = self.pin(uid);
        let requirements = accessibility_requirements(&input, &mut pin);
        self.keep_pin(uid, pin);
        requirements
    }

    /// The Secret's data. The error is the API's text, never the data.
    pub(super) async fn read_secret(&self, secret: &SecretRef) -> Result<Credentials, String> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &secret.namespace);
        api.get(&secret.name).await.map(|s| credentials(&s)).map_err(|e| api_error_text(&e))
    }
}
