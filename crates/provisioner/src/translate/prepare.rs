//! One provisioning attempt up to CreateVolume: what it reads and the rules between the reads, in upstream's order
//! (external-provisioner pkg/controller/controller.go, `prepareProvision`).
//!
//! The controller asks [`Preparation::next_read`] what to read, reads it and hands the plain answer back, until nothing
//! is left to read; then [`Preparation::request`] builds the request. A read is asked for only once every rule
//! before it has passed, so a refused claim costs no more API requests than upstream's:
//! 1. [`Preparation::new`]: the data source and the plan (every check that needs no read).
//! 2. A source in another namespace: the ReferenceGrants there.
//! 3. A snapshot to restore (its VolumeSnapshot and content) or a claim to clone (its claim and PV, cached).
//! 4. The driver has VOLUME_ACCESSIBILITY_CONSTRAINTS: the nodes, for the accessibility requirements.
//! 5. The class names a provisioner Secret: the Secret; then every other Secret reference is resolved.
//! 6. The claim names a VolumeAttributesClass: the class.

use std::collections::BTreeMap;

use csi_client::proto::{CreateVolumeRequest, TopologyRequirement, VolumeContentSource};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass, VolumeAttributesClass};
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};

use super::api_errors::{data_source_refusal, grants_not_listed, snapshot_not_read};
use super::clone_source::clone_content_source;
use super::create_volume::{CreateVolumePlan, ResolvedInputs, create_volume_plan, create_volume_request};
use super::data_source::{ContentKind, DataSource, claim_data_source};
use super::parameters::deprecation_warnings;
use super::provisioner::Provisioner;
use super::reference_grant::{ReferenceGrant, check_grant, needs_grant};
use super::refusal::Refusal;
use super::secrets::{
    Credentials, SecretKind, SecretRef, SecretReferences, secret_read_failure, secret_reference, secret_references,
};
use super::snapshot_source::snapshot_restore;
use super::topology::{TopologyInput, TopologyPin, accessibility_requirements};

/// A request ready to send, and what else the attempt needs afterwards.
pub struct Prepared {
    pub plan: CreateVolumePlan,
    pub request: CreateVolumeRequest,
    /// The provisioner Secret's data (sent again with a DeleteVolume of a volume that cannot be used).
    pub credentials: Credentials,
    pub references: SecretReferences,
    /// The claim being cloned, which gets the clone-protection finalizer before the call.
    pub clone_source: Option<DataSource>,
    /// The VolumeSnapshot being restored, which gets the source-protection finalizer before the call.
    pub snapshot_source: Option<DataSource>,
}

/// What the controller reads next.
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    /// The ReferenceGrants in this namespace: the data source lives there, not in the claim's namespace.
    ReferenceGrants(String),
    /// The VolumeSnapshot to restore and the VolumeSnapshotContent it is bound to.
    Snapshot(DataSource),
    /// The claim to clone and the PV it is bound to.
    CloneSource(DataSource),
    /// The CSINodes and Nodes, and what the claim's topology was computed from before ([`TopologyPin`]).
    Topology,
    /// The provisioner Secret the class names.
    Secret(SecretRef),
    /// The VolumeAttributesClass the claim names.
    VolumeAttributesClass(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Grant,
    Content,
    Topology,
    Secret,
    References,
    VolumeAttributesClass,
    Ready,
}

/// One attempt's preparation, between its reads.
pub struct Preparation<'a> {
    claim: &'a PersistentVolumeClaim,
    /// In its CSI form (see [`super::migration::csi_class`]).
    class: &'a StorageClass,
    provisioner: &'a Provisioner,
    /// The selected node, if any.
    node: Option<&'a str>,
    plan: CreateVolumePlan,
    step: Step,
    volume_content_source: Option<VolumeContentSource>,
    clone_source: Option<DataSource>,
    snapshot_source: Option<DataSource>,
    accessibility_requirements: Option<TopologyRequirement>,
    secret: Option<SecretRef>,
    credentials: Credentials,
    references: SecretReferences,
    volume_attributes_class: Option<VolumeAttributesClass>,
}

impl<'a> Preparation<'a> {
    /// The checks that need no read: the claim's data source, then [`create_volume_plan`].
    pub fn new(
        claim: &'a PersistentVolumeClaim,
        class: &'a StorageClass,
        provisioner: &'a Provisioner,
        node: Option<&'a str>,
    ) -> Result<Preparation<'a>, Refusal> {
        let source = claim_data_source(claim, provisioner.features.cross_namespace_volume_data_source)?;
        let plan = create_volume_plan(claim, class, provisioner, source.as_ref())?;
        Ok(Preparation {
            claim,
            class,
            provisioner,
            node,
            plan,
            step: Step::Grant,
            volume_content_source: None,
            clone_source: None,
            snapshot_source: None,
            accessibility_requirements: None,
            secret: None,
            credentials: Credentials::default(),
            references: SecretReferences::default(),
            volume_attributes_class: None,
        })
    }

    /// Deprecated class parameters the driver still gets: logged, not refused.
    pub fn warnings(&self) -> Vec<String> {
        deprecation_warnings(self.class.parameters.as_ref().unwrap_or(&BTreeMap::new()))
    }

    /// What to read next, or `None` once [`Preparation::request`] can build the request. The rules that need no
    /// read are applied on the way (a Secret reference that cannot be resolved is refused here).
    pub fn next_read(&mut self) -> Result<Option<Read>, Refusal> {
        loop {
            match self.step {
                Step::Grant => match self.source() {
                    Some(source) if needs_grant(self.claim_namespace(), source) => {
                        return Ok(Some(Read::ReferenceGrants(source.namespace.clone())));
                    }
                    _ => self.step = Step::Content,
                },
                Step::Content => match &self.plan.content {
                    Some((ContentKind::Snapshot, source)) => return Ok(Some(Read::Snapshot(source.clone()))),
                    Some((ContentKind::Clone, source)) => return Ok(Some(Read::CloneSource(source.clone()))),
                    None => self.step = Step::Topology,
                },
                Step::Topology if self.provisioner.supports_topology() => return Ok(Some(Read::Topology)),
                Step::Topology => self.step = Step::Secret,
                Step::Secret => {
                    let parameters = self.class.parameters.clone().unwrap_or_default();
                    let volume_name = &self.plan.volume_name;
                    self.secret =
                        secret_reference(SecretKind::Provisioner, &parameters, volume_name, Some(self.claim))?;
                    match &self.secret {
                        Some(secret) => return Ok(Some(Read::Secret(secret.clone()))),
                        None => self.step = Step::References,
                    }
                }
                Step::References => {
                    let parameters = self.class.parameters.clone().unwrap_or_default();
                    self.references = secret_references(&parameters, &self.plan.volume_name, Some(self.claim))?;
                    self.step = Step::VolumeAttributesClass;
                }
                Step::VolumeAttributesClass => match &self.plan.volume_attributes_class {
                    Some(name) => return Ok(Some(Read::VolumeAttributesClass(name.clone()))),
                    None => self.step = Step::Ready,
                },
                Step::Ready => return Ok(None),
            }
        }
    }

    /// The answer to [`Read::ReferenceGrants`]: the grants, or the API's error text.
    pub fn grants(&mut self, listed: Result<Vec<ReferenceGrant>, String>) -> Result<(), Refusal> {
        let source = self.source().expect("a grant is read only for a data source");
        let grants = listed.map_err(|error| grants_not_listed(&source.namespace, &error))?;
        let name = self.claim.metadata.name.as_deref().unwrap_or_default();
        check_grant(self.claim_namespace(), name, source, grants.iter())?;
        self.step = Step::Content;
        Ok(())
    }

    /// The answer to [`Read::Snapshot`]: the snapshot and its content as the API holds them (None: not found), or
    /// the API's error text for the snapshot. Returns a warning to log when the claim asks for more than the
    /// snapshot holds (the driver has to expand).
    pub fn snapshot(
        &mut self,
        read: Result<(Option<VolumeSnapshot>, Option<VolumeSnapshotContent>), String>,
    ) -> Result<Option<String>, Refusal> {
        let source = self.source().expect("a snapshot is read only for a snapshot source").clone();
        let restore = read
            .map_err(|error| snapshot_not_read(&source.name, &error))
            .and_then(|(snapshot, content)| {
                let prevent_conversion = self.provisioner.prevent_volume_mode_conversion;
                let driver = &self.class.provisioner;
                snapshot_restore(self.claim, &source, snapshot.as_ref(), content.as_ref(), driver, prevent_conversion)
            })
            .map_err(|refusal| data_source_refusal(refusal, &source))?;
        self.volume_content_source = Some(restore.content_source);
        self.snapshot_source = Some(source);
        self.step = Step::Topology;
        Ok(restore.larger_than_snapshot)
    }

    /// The answer to [`Read::CloneSource`]: the claim to clone and its PV as the caches hold them (None: missing).
    pub fn clone_source(
        &mut self,
        source_claim: Option<&PersistentVolumeClaim>,
        source_volume: Option<&PersistentVolume>,
    ) -> Result<(), Refusal> {
        let source = self.source().expect("a clone source is read only for a clone").clone();
        let content = clone_content_source(self.claim, &source, source_claim, source_volume, &self.class.provisioner)
            .map_err(|refusal| data_source_refusal(refusal, &source))?;
        self.volume_content_source = Some(content);
        self.clone_source = Some(source);
        self.step = Step::Topology;
        Ok(())
    }

    /// The answer to [`Read::Topology`]: the nodes to consider, and the claim's pin, filled in on the way (the
    /// controller keeps it whatever the outcome).
    pub fn topology(&mut self, csi_nodes: &[CSINode], nodes: &[Node], pin: &mut TopologyPin) -> Result<(), Refusal> {
        let input = TopologyInput {
            driver_name: &self.provisioner.driver_name,
            claim_name: self.claim.metadata.name.as_deref().unwrap_or_default(),
            allowed_topologies: self.class.allowed_topologies.as_deref().unwrap_or_default(),
            selected_node: self.node,
            strict_topology: self.provisioner.strict_topology,
            immediate_topology: self.provisioner.immediate_topology,
            csi_nodes,
            nodes,
        };
        self.accessibility_requirements = accessibility_requirements(&input, pin)?;
        self.step = Step::Secret;
        Ok(())
    }

    /// The answer to [`Read::Secret`]: the Secret's data, or the API's error text (never the data).
    pub fn secret(&mut self, read: Result<Credentials, String>) -> Result<(), Refusal> {
        let secret = self.secret.as_ref().expect("a Secret is read only once it is named");
        self.credentials = read.map_err(|error| secret_read_failure(secret, &error))?;
        self.step = Step::References;
        Ok(())
    }

    /// The answer to [`Read::VolumeAttributesClass`]: the class (None: not found), or the API's error text.
    pub fn volume_attributes_class(
        &mut self,
        read: Result<Option<VolumeAttributesClass>, String>,
    ) -> Result<(), Refusal> {
        self.volume_attributes_class = read.map_err(Refusal::no_change)?;
        self.step = Step::Ready;
        Ok(())
    }

    /// The request, once [`Preparation::next_read`] has nothing more to read: [`create_volume_request`].
    pub fn request(self) -> Result<Prepared, Refusal> {
        debug_assert_eq!(self.step, Step::Ready, "every read was answered");
        let resolved = ResolvedInputs {
            credentials: self.credentials.clone(),
            volume_content_source: self.volume_content_source,
            accessibility_requirements: self.accessibility_requirements,
            volume_attributes_class: self.volume_attributes_class.as_ref(),
        };
        let request = create_volume_request(&self.plan, self.claim, self.class, self.provisioner, resolved)?;
        Ok(Prepared {
            plan: self.plan,
            request,
            credentials: self.credentials,
            references: self.references,
            clone_source: self.clone_source,
            snapshot_source: self.snapshot_source,
        })
    }

    fn source(&self) -> Option<&DataSource> {
        self.plan.content.as_ref().map(|(_, source)| source)
    }

    fn claim_namespace(&self) -> &str {
        self.claim.metadata.namespace.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
