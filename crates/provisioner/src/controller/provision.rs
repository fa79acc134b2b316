//! The claim worker: one claim (by UID) per run.

use std::time::Instant;

use csi_client::proto::{CreateVolumeRequest, DeleteVolumeRequest, TopologyRequirement};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use kube::Api;
use kube::api::{ListParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use sidecar_runtime::Outcome;
use sidecar_runtime::update::{Updated, set_finalizer, update};

use super::{ClaimKey, Shared, stores};
use crate::translate::claim_filter::{
    ClaimDecision, claim_class_name, claim_decision, library_volume_name, selected_node,
};
use crate::translate::clone_source::{clone_content_source, clone_protection_releasable, has_clone_protection};
use crate::translate::create_volume::{
    CreateVolumePlan, ResolvedInputs, create_volume_plan, create_volume_request, volume_name,
};
use crate::translate::data_source::{ContentKind, DataSource, claim_data_source};
use crate::translate::in_flight::{InFlight, driver_is_done, has_provisioning_finalizer, in_flight};
use crate::translate::names::{
    ANN_SELECTED_NODE, EVENT_PROVISIONING_CLEANUP_FAILED, FINALIZER_CLONE_PROTECTION, FINALIZER_PROVISIONING_PROTECTION,
};
use crate::translate::node_deployment::{NodeCheck, node_check, tends_in_flight_volume};
use crate::translate::parameters::deprecation_warnings;
use crate::translate::persistent_volume::persistent_volume;
use crate::translate::reference_grant::{ReferenceGrant, check_grant, needs_grant};
use crate::translate::refusal::{
    EventType, PlannedEvent, ProvisioningState, Refusal, RefusalKind, create_volume_failure, provisioning_event,
    provisioning_succeeded_event,
};
use crate::translate::secrets::{
    Credentials, SecretKind, SecretRef, SecretReferences, credentials, secret_read_failure, secret_reference,
    secret_references,
};
use crate::translate::topology::{TopologyInput, accessibility_requirements};

/// Attempts at deleting a volume the provisioner created but cannot use (items 28, 29).
const REJECTED_VOLUME_DELETE_ATTEMPTS: usize = 5;

/// A request ready to send, and what else the attempt needs afterwards.
pub(super) struct Prepared {
    plan: CreateVolumePlan,
    pub(super) request: CreateVolumeRequest,
    credentials: Credentials,
    references: SecretReferences,
    /// The claim being cloned, which gets the clone-protection finalizer before the call.
    clone_source: Option<DataSource>,
    /// The VolumeSnapshot being restored, which gets the source-protection finalizer before the call.
    snapshot_source: Option<DataSource>,
}

/// The text of a Kubernetes API error as client-go prints it (the Status message), for events.
pub(super) fn api_error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

fn cached<K: kube::Resource<DynamicType = ()> + Clone>(store: &Option<kube::runtime::reflector::Store<K>>) -> Vec<K> {
    store.as_ref().map(|s| s.state().iter().map(|o| (**o).clone()).collect()).unwrap_or_default()
}

/// A data source that is not usable (yet), worded as upstream words it.
fn source_refusal(mut refusal: Refusal, source: &DataSource) -> Refusal {
    refusal.message = format!(
        "error getting handle for DataSource Type {} by Name {}: {}",
        source.kind, source.name, refusal.message
    );
    refusal
}

pub(super) fn claim_path(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Shared {
    pub(super) async fn sync_claim(&self, key: &ClaimKey) -> Outcome {
        let Some(claim) = self.stores.claim(key) else {
            self.forget_pin(&key.uid);
            return Outcome::Done;
        };
        let p = &self.provisioner;
        if has_clone_protection(&claim) {
            let claims = self.stores.claims.state();
            if clone_protection_releasable(&claim, claims.iter().map(|c| &**c))
                && let Err(err) = self.remove_finalizer(&claim, FINALIZER_CLONE_PROTECTION).await
            {
                tracing::warn!(claim = %claim_path(&claim), error = %err, "cannot remove the clone protection");
                return Outcome::Retry;
            }
        }
        let own_volume = volume_name(&p.volume_name_prefix, &key.uid, p.volume_name_uuid_length).ok();
        let volume_exists = own_volume.as_deref().is_some_and(|name| self.stores.volume(name).is_some());
        let in_flight_here = tends_in_flight_volume(&claim, p);
        match in_flight(&claim, p, volume_exists) {
            InFlight::Release if in_flight_here => return self.release_claim(&claim).await,
            InFlight::Recover if in_flight_here => return self.recover(&claim).await,
            _ => {}
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Outcome::Done;
        }
        let class = self.stores.class(&claim_class_name(&claim));
        let library_volume_exists = self.stores.volume(&library_volume_name(&claim)).is_some();
        match claim_decision(&claim, class.as_deref(), p, library_volume_exists) {
            ClaimDecision::Skip(reason) => {
                tracing::trace!(claim = %claim_path(&claim), ?reason, "not provisioning");
                Outcome::Done
            }
            ClaimDecision::Retry(message) => {
                tracing::info!(claim = %claim_path(&claim), %message, "cannot provision yet");
                Outcome::Retry
            }
            ClaimDecision::Provision { selected_node } => {
                let Some(class) = class else { return Outcome::Retry };
                if let Some(local) = &p.node_deployment {
                    match node_check(selected_node.as_deref(), &class, p) {
                        NodeCheck::Provision => {}
                        NodeCheck::Compete => return self.become_owner(key, &class, local).await,
                        NodeCheck::NotOurs(reason) => {
                            tracing::trace!(claim = %claim_path(&claim), %reason, "not this node's claim");
                            return Outcome::Done;
                        }
                    }
                }
                self.provision(&claim, &class, selected_node.as_deref()).await
            }
        }
    }

    async fn provision(&self, claim: &PersistentVolumeClaim, class: &StorageClass, node: Option<&str>) -> Outcome {
        let started = Instant::now();
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(claim = %claim_path(claim), "provisioning");
        self.publish(claim, &provisioning_event(namespace, name)).await;

        let class_name = class.metadata.name.as_deref().unwrap_or_default();
        let source = claim.spec.as_ref().and_then(|s| s.data_source.as_ref()).map(|d| d.kind.as_str()).unwrap_or("");
        let attempt = async {
            let migrated = self.is_migrated_class(class);
            let csi_class = self.csi_class(class)?;
            self.try_provision(claim, &csi_class, node, migrated).await
        };
        match attempt.await {
            Ok(volume) => {
                tracing::info!(claim = %claim_path(claim), %volume, "provisioned");
                self.metrics.provisioned(class_name, source, started.elapsed());
                self.capacity_changed();
                self.forget_pin(claim.metadata.uid.as_deref().unwrap_or_default());
                self.publish(claim, &provisioning_succeeded_event(&volume)).await;
                Outcome::Done
            }
            Err(refusal) => {
                if refusal.retried() {
                    self.metrics.provision_failed(class_name, source);
                }
                // A driver out of space may say so; the published capacity should show it (item 67).
                self.capacity_changed();
                self.refused(claim, refusal).await
            }
        }
    }

    /// One attempt: the request, the finalizer, CreateVolume, the PV. Returns the PV name. `class` is in its CSI
    /// form; `migrated` says whether it was an in-tree class (then the PV is written in the in-tree form).
    async fn try_provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<&str>,
        migrated: bool,
    ) -> Result<String, Refusal> {
        let Prepared { plan, request, credentials, references, clone_source, snapshot_source } =
            self.prepare(claim, class, node).await?;

        // Beyond upstream: recorded in the API before the call, so a crash cannot lose the volume.
        let protected = if has_provisioning_finalizer(claim) {
            claim.clone()
        } else {
            self.add_finalizer(claim, FINALIZER_PROVISIONING_PROTECTION)
                .await
                .map_err(|e| Refusal::no_change(api_error_text(&e)))?
                .ok_or_else(|| Refusal::no_change(format!("claim {} is gone", claim_path(claim))))?
        };
        if let Some(source) = &clone_source {
            self.protect_clone_source(source).await?;
        }
        if let Some(source) = &snapshot_source {
            self.protect_snapshot(source).await?;
        }
        let may_reschedule = self.provisioner.supports_topology() && node.is_some();
        let response = match self.csi_for(migrated).create_volume(request).await {
            Ok(response) => response,
            Err(err) => {
                let refusal = create_volume_failure(&err, may_reschedule);
                if driver_is_done(refusal.state) {
                    self.remove_claim_finalizer_logged(&protected).await;
                }
                return Err(refusal);
            }
        };
        let volume = response.volume.unwrap_or_default();
        let pv = match persistent_volume(&volume, &plan, &references, claim, class, &self.provisioner) {
            Ok(pv) => pv,
            Err(rejection) => {
                let cleanup = self.delete_rejected_volume(&volume.volume_id, credentials, migrated).await;
                return Err(rejection.refusal(&plan.volume_name, cleanup.err().as_deref()));
            }
        };
        let pv = match self.api_volume(pv, migrated) {
            Ok(pv) => pv,
            Err(message) => {
                // As upstream: the volume cannot be recorded, so it goes; if that fails, try again later.
                let state = match self.delete_rejected_volume(&volume.volume_id, credentials, migrated).await {
                    Ok(()) => ProvisioningState::Finished,
                    Err(_) => ProvisioningState::InBackground,
                };
                return Err(Refusal::failed(state, message));
            }
        };
        self.save_volume(&pv).await?;
        // The PV exists: the finalizer has done its job. Should this fail, the PV's watch event queues the claim
        // again and the next run releases it.
        self.remove_claim_finalizer_logged(&protected).await;
        if let Some(source) = &snapshot_source {
            self.release_snapshot(claim, source).await;
        }
        Ok(plan.volume_name)
    }

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
                    .map_err(|r| source_refusal(r, source))?;
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
                .map_err(|r| source_refusal(r, source))?;
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
    async fn check_cross_namespace_grant(
        &self,
        claim: &PersistentVolumeClaim,
        source: &DataSource,
    ) -> Result<(), Refusal> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        if !needs_grant(namespace, source) {
            return Ok(());
        }
        let grants: Api<ReferenceGrant> = Api::namespaced(self.client.clone(), &source.namespace);
        let grants = grants.list(&ListParams::default()).await.map_err(|e| {
            Refusal::no_change(format!(
                "error listing ReferenceGrants in namespace {}: {}",
                source.namespace,
                api_error_text(&e)
            ))
        })?;
        check_grant(namespace, claim.metadata.name.as_deref().unwrap_or_default(), source, grants.items.iter())
    }

    fn topology(
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

    /// What follows a failed attempt: the event, the topology pin, a reschedule, and when to try again.
    async fn refused(&self, claim: &PersistentVolumeClaim, refusal: Refusal) -> Outcome {
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        match refusal.kind {
            RefusalKind::Ignored { .. } => {
                tracing::info!(claim = %claim_path(claim), reason = %refusal, "not provisioning")
            }
            _ => {
                tracing::warn!(claim = %claim_path(claim), error = %refusal, state = ?refusal.state, "provisioning failed")
            }
        }
        if let Some(event) = refusal.event() {
            self.publish(claim, &event).await;
        }
        match refusal.state {
            ProvisioningState::Finished => self.forget_pin(uid),
            ProvisioningState::Reschedule => {
                self.forget_pin(uid);
                return match self.remove_selected_node(claim).await {
                    Ok(()) => Outcome::Done,
                    Err(err) => {
                        tracing::warn!(claim = %claim_path(claim), error = %err, "cannot give the claim back to the scheduler");
                        Outcome::Retry
                    }
                };
            }
            ProvisioningState::InBackground | ProvisioningState::NoChange => {}
        }
        match refusal.kind {
            RefusalKind::Ignored { .. } => Outcome::Done,
            RefusalKind::Infeasible => Outcome::RetryAfter(self.slow_retry()),
            RefusalKind::Failed => Outcome::Retry,
        }
    }

    /// The claim was deleted before its PV was written: learn the volume id by repeating CreateVolume with the same
    /// name and arguments, delete the volume, then let the claim go.
    async fn recover(&self, claim: &PersistentVolumeClaim) -> Outcome {
        let path = claim_path(claim);
        let class_name = claim_class_name(claim);
        let Some(class) = self.stores.class(&class_name) else {
            let message =
                format!("cannot delete the volume of deleted claim {path}: storageClass \"{class_name}\" not found");
            return self.cleanup_failed(claim, message).await;
        };
        let migrated = self.is_migrated_class(&class);
        let class = match self.csi_class(&class) {
            Ok(class) => class.into_owned(),
            // A class that cannot be translated never made a request: there is no volume.
            Err(_) => return self.release_claim(claim).await,
        };
        // The cache may lag: a PV written just before a crash makes the volume the PV's business (its reclaim
        // policy decides), so ask the API itself before deleting anything.
        let p = &self.provisioner;
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        if let Ok(name) = volume_name(&p.volume_name_prefix, uid, p.volume_name_uuid_length) {
            match Api::<PersistentVolume>::all(self.client.clone()).get_opt(&name).await {
                Ok(Some(_)) => return self.release_claim(claim).await,
                Ok(None) => {}
                Err(err) => return self.cleanup_failed(claim, api_error_text(&err)).await,
            }
        }
        tracing::info!(claim = %path, "claim deleted while its volume was being provisioned: deleting the volume");
        let prepared = match self.prepare(claim, &class, selected_node(claim).as_deref()).await {
            Ok(prepared) => prepared,
            // A request that cannot be built was never sent: there is no volume.
            Err(refusal) if refusal.state == ProvisioningState::Finished => {
                tracing::info!(claim = %path, reason = %refusal, "no volume can exist for the deleted claim");
                return self.release_claim(claim).await;
            }
            Err(refusal) => return self.cleanup_failed(claim, refusal.message).await,
        };
        let volume_name = prepared.request.name.clone();
        let snapshot_source = prepared.snapshot_source.clone();
        let csi = self.csi_for(migrated);
        match csi.create_volume(prepared.request).await {
            Ok(response) => {
                let volume_id = response.volume.map(|v| v.volume_id).unwrap_or_default();
                let request = DeleteVolumeRequest { volume_id, secrets: prepared.credentials.into_map() };
                if let Err(err) = csi.delete_volume(request).await {
                    return self.cleanup_failed(claim, err.go_text()).await;
                }
                tracing::info!(claim = %path, volume = %volume_name, "deleted the volume of the deleted claim");
            }
            Err(err) => {
                let refusal = create_volume_failure(&err, false);
                if !driver_is_done(refusal.state) {
                    return self.cleanup_failed(claim, refusal.message).await;
                }
                tracing::info!(claim = %path, error = %refusal, "the driver has no volume for the deleted claim");
            }
        }
        self.forget_pin(claim.metadata.uid.as_deref().unwrap_or_default());
        if let Some(source) = &snapshot_source {
            self.release_snapshot(claim, source).await;
        }
        self.release_claim(claim).await
    }

    async fn cleanup_failed(&self, claim: &PersistentVolumeClaim, message: String) -> Outcome {
        tracing::warn!(claim = %claim_path(claim), error = %message, "cleanup of a deleted claim's volume failed");
        let event = PlannedEvent { event_type: EventType::Warning, reason: EVENT_PROVISIONING_CLEANUP_FAILED, message };
        self.publish(claim, &event).await;
        Outcome::Retry
    }

    /// DeleteVolume for a volume that cannot be used, a few times within one timeout.
    async fn delete_rejected_volume(
        &self,
        volume_id: &str,
        credentials: Credentials,
        migrated: bool,
    ) -> Result<(), String> {
        let secrets = credentials.into_map();
        let deadline = Instant::now() + self.csi.timeout();
        let mut last = String::new();
        for _ in 0..REJECTED_VOLUME_DELETE_ATTEMPTS {
            let request = DeleteVolumeRequest { volume_id: volume_id.to_string(), secrets: secrets.clone() };
            match self.csi_for(migrated).delete_volume(request).await {
                Ok(_) => return Ok(()),
                Err(err) => last = err.go_text(),
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(last)
    }

    /// Creates the PV; one that exists already is success (item 34).
    async fn save_volume(&self, pv: &PersistentVolume) -> Result<(), Refusal> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), pv).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 && status.reason == "AlreadyExists" => Ok(()),
            Err(err) => Err(Refusal::failed(
                ProvisioningState::InBackground,
                format!(
                    "error saving volume {}: {}",
                    pv.metadata.name.as_deref().unwrap_or_default(),
                    api_error_text(&err)
                ),
            )),
        }
    }

    async fn release_claim(&self, claim: &PersistentVolumeClaim) -> Outcome {
        match self.remove_claim_finalizer(claim).await {
            Ok(()) => Outcome::Done,
            Err(err) => {
                tracing::warn!(claim = %claim_path(claim), error = %err, "cannot remove the provisioning finalizer");
                Outcome::Retry
            }
        }
    }

    pub(super) fn claims_api(&self, claim: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), claim.metadata.namespace.as_deref().unwrap_or_default())
    }

    /// Adds `finalizer` to the claim; returns the claim as stored (`None` when it is gone).
    async fn add_finalizer(
        &self,
        claim: &PersistentVolumeClaim,
        finalizer: &str,
    ) -> Result<Option<PersistentVolumeClaim>, kube::Error> {
        let api = self.claims_api(claim);
        let written = self.own_write(claim, set_finalizer(&api, claim, finalizer, true)).await?;
        Ok(match written {
            Updated::Written(stored) => Some(stored),
            Updated::Unchanged => Some(claim.clone()),
            Updated::Gone => None,
        })
    }

    async fn remove_claim_finalizer(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        self.remove_finalizer(claim, FINALIZER_PROVISIONING_PROTECTION).await
    }

    /// Removes `finalizer` from the claim (see [`Shared::newest`]).
    async fn remove_finalizer(&self, claim: &PersistentVolumeClaim, finalizer: &str) -> Result<(), kube::Error> {
        let newest = self.newest(claim);
        let api = self.claims_api(&newest);
        self.own_write(&newest, set_finalizer(&api, &newest, finalizer, false)).await.map(|_| ())
    }

    /// The newest copy of the claim this provisioner has seen: the cache's, or `claim` when that is newer (as right
    /// after our own write). Updates computed from it rarely meet a Conflict.
    fn newest(&self, claim: &PersistentVolumeClaim) -> PersistentVolumeClaim {
        match stores::claim_key(claim).and_then(|key| self.stores.claim(&key)) {
            Some(cached) if newer(&cached, claim) => (*cached).clone(),
            _ => claim.clone(),
        }
    }

    /// Removes the finalizer (whether or not the cached claim shows it: it may have been added since).
    async fn remove_claim_finalizer_logged(&self, claim: &PersistentVolumeClaim) {
        if let Err(err) = self.remove_claim_finalizer(claim).await {
            tracing::warn!(claim = %claim_path(claim), error = %err, "cannot remove the provisioning finalizer yet");
        }
    }

    /// Adds the clone-protection finalizer to the claim being cloned (read from the cache: the plan found it there).
    async fn protect_clone_source(&self, source: &DataSource) -> Result<(), Refusal> {
        let Some(source_claim) = self.stores.claims.get(&ObjectRef::new(&source.name).within(&source.namespace)) else {
            return Err(Refusal::no_change(format!("source claim {}/{} is gone", source.namespace, source.name)));
        };
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &source.namespace);
        set_finalizer(&api, &*source_claim, FINALIZER_CLONE_PROTECTION, true)
            .await
            .map(|_| ())
            .map_err(|e| Refusal::no_change(api_error_text(&e)))
    }

    /// Gives the claim back to the scheduler (item 40): the selected-node annotation goes, with an update.
    async fn remove_selected_node(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let newest = self.newest(claim);
        let api = self.claims_api(&newest);
        update(&api, &newest, |current| {
            let mut updated = current.clone();
            updated.metadata.annotations.as_mut()?.remove(ANN_SELECTED_NODE)?;
            Some(updated)
        })
        .await?;
        Ok(())
    }
}

/// Whether `a` is a later version of the claim than `b` (resourceVersions compared as integers, as upstream's
/// snapshot controller compares them; an unreadable one is never newer).
fn newer(a: &PersistentVolumeClaim, b: &PersistentVolumeClaim) -> bool {
    let version =
        |c: &PersistentVolumeClaim| c.metadata.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    a.metadata.uid == b.metadata.uid && matches!((version(a), version(b)), (Some(a), Some(b)) if a > b)
}
