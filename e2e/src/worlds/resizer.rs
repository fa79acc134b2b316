//! The world of a resizer test: a namespace, a hostpath plugin under a driver name of its own, a StorageClass
//! allowing expansion, and statically provisioned volumes: the backend volume made with csictl, a PV naming it and
//! a claim pre-bound to that PV.
//!
//! Every test runs its own plugin under a driver name of its own (`<namespace>.csi.e2e`): resizers watch the whole
//! cluster, and a unique driver name keeps each test's claims to its own pair of processes. StorageClasses,
//! VolumeAttributesClasses and PVs are cluster-scoped, so they are named after the namespace and removed when the
//! world is dropped. The resizers run as the world's ServiceAccount with upstream's RBAC rules (crate::processes::rbac), never
//! as admin.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Event, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeSpec, SecretReference, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::processes::rbac::Sidecar;
use crate::processes::scenario::Process;
use crate::processes::sidecar_mode::sidecar_command;
use crate::wait::{eventually, wait_for};
use crate::worlds::driver::DriverWorld;

pub const TIMEOUT: Duration = Duration::from_secs(60);

/// One test's world: namespace, plugin, classes and API handles.
pub struct ResizerWorld {
    /// Namespace, plugin, and the ServiceAccount every resizer of the world runs as (fields reached through
    /// `Deref`: `world.client`, `world.scenario`, …).
    pub base: DriverWorld,
    pub volumes: Vec<String>,
    pub attribute_classes: Vec<String>,
    /// `spec.csi.controllerExpandSecretRef` (in the test's namespace) of the PVs made from now on.
    pub expand_secret: Option<String>,
}

impl ResizerWorld {
    pub async fn new(prefix: &str, plugin_args: &[&str]) -> ResizerWorld {
        let base = DriverWorld::start(Sidecar::Resizer, prefix, None, plugin_args).await;
        let world = ResizerWorld { base, volumes: Vec::new(), attribute_classes: Vec::new(), expand_secret: None };
        let class = StorageClass {
            metadata: ObjectMeta { name: Some(world.ns().to_string()), ..Default::default() },
            provisioner: world.driver.clone(),
            allow_volume_expansion: Some(true),
            reclaim_policy: Some("Retain".into()),
            ..Default::default()
        };
        Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &class).await.unwrap();
        world
    }

    pub fn start_resizer(&mut self, name: &str, extra: &[&str]) -> Process {
        let mut args = vec![
            format!("--csi-address={}", self.socket.display()),
            self.identity.kubeconfig_flag(),
            "--retry-interval-start=500ms".to_string(),
            "--retry-interval-max=5s".to_string(),
            "--http-endpoint=127.0.0.1:0".to_string(),
            "-v=5".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let (program, args) = sidecar_command("csi-resizer", args);
        self.scenario.start(name, &program, &args)
    }

    pub fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), self.ns())
    }

    pub fn pvs(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// The backend volume as ListVolumes shows it.
    pub fn backend_volume(&self, volume_id: &str) -> serde_json::Value {
        let list = self.csictl(&["list-volumes"]);
        list.as_array()
            .and_then(|volumes| volumes.iter().find(|v| v["volume_id"] == volume_id))
            .cloned()
            .unwrap_or_else(|| panic!("volume {volume_id} not listed: {list}"))
    }

    pub async fn create_attribute_class(&mut self, short: &str, parameters: &[(&str, &str)]) -> String {
        let name = format!("{}-{short}", self.ns());
        let class = VolumeAttributesClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            driver_name: self.driver.clone(),
            parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        };
        Api::<VolumeAttributesClass>::all(self.client.clone()).create(&PostParams::default(), &class).await.unwrap();
        self.attribute_classes.push(name.clone());
        name
    }

    /// A backend volume of 1Gi, its PV and a claim bound to it. Returns the backend volume id once the claim is
    /// Bound (and, with a class, once that class is current).
    pub async fn bound_claim(&mut self, claim: &str, block: bool, attribute_class: Option<&str>) -> String {
        let backend_name = format!("{}-{claim}", self.ns());
        let mut args = vec!["create-volume", backend_name.as_str(), "--size", "1Gi"];
        if block {
            args.push("--block");
        }
        let created = self.csictl(&args);
        let volume_id = created["volume_id"].as_str().expect("volume id").to_string();
        let pv_name = format!("{}-{claim}", self.ns());
        let mode = if block { "Block" } else { "Filesystem" };
        let size = BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))]);
        let pv = PersistentVolume {
            metadata: ObjectMeta { name: Some(pv_name.clone()), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(size.clone()),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some(self.ns().to_string()),
                volume_mode: Some(mode.into()),
                persistent_volume_reclaim_policy: Some("Retain".into()),
                volume_attributes_class_name: attribute_class.map(str::to_string),
                claim_ref: Some(ObjectReference {
                    namespace: Some(self.ns().to_string()),
                    name: Some(claim.to_string()),
                    ..Default::default()
                }),
                csi: Some(CSIPersistentVolumeSource {
                    driver: self.driver.clone(),
                    volume_handle: volume_id.clone(),
                    controller_expand_secret_ref: self.expand_secret.as_ref().map(|name| SecretReference {
                        name: Some(name.clone()),
                        namespace: Some(self.ns().to_string()),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.pvs().create(&PostParams::default(), &pv).await.unwrap();
        self.volumes.push(pv_name.clone());
        let pvc = PersistentVolumeClaim {
            metadata: ObjectMeta { name: Some(claim.to_string()), ..Default::default() },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some(self.ns().to_string()),
                volume_mode: Some(mode.into()),
                volume_name: Some(pv_name),
                volume_attributes_class_name: attribute_class.map(str::to_string),
                resources: Some(VolumeResourceRequirements { requests: Some(size), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.claims().create(&PostParams::default(), &pvc).await.unwrap();
        let claims = self.claims();
        wait_for(&format!("claim {claim} bound"), TIMEOUT, || async {
            let pvc = claims.get(claim).await.ok()?;
            let status = pvc.status?;
            let bound = status.phase.as_deref() == Some("Bound");
            let current = status.current_volume_attributes_class_name.as_deref() == attribute_class;
            (bound && current).then_some(())
        })
        .await;
        volume_id
    }

    pub async fn claim(&self, name: &str) -> PersistentVolumeClaim {
        self.claims().get(name).await.unwrap()
    }

    pub async fn patch_claim(&self, name: &str, patch: serde_json::Value) {
        self.claims().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    pub async fn set_attribute_class(&self, claim: &str, class: &str) {
        self.patch_claim(claim, json!({"spec": {"volumeAttributesClassName": class}})).await;
    }

    /// The claim's events with `reason`, as (message, source component).
    pub async fn events(&self, claim: &str, reason: &str) -> Vec<(String, String)> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), self.ns());
        let selector = format!("involvedObject.name={claim},reason={reason}");
        let listed = events.list(&ListParams::default().fields(&selector)).await.map(|l| l.items).unwrap_or_default();
        listed
            .into_iter()
            .map(|e| {
                let component = e.source.and_then(|s| s.component).unwrap_or_default();
                (e.message.unwrap_or_default(), component)
            })
            .collect()
    }

    pub async fn wait_for_event(&self, claim: &str, reason: &str, contains: &str) {
        eventually(&format!("{reason} event on {claim} containing {contains:?}"), TIMEOUT, || async {
            self.events(claim, reason).await.iter().any(|(message, _)| message.contains(contains))
        })
        .await;
    }

    /// Waits until the claim's current class is `class` with nothing being modified.
    pub async fn wait_for_current_class(&self, claim: &str, class: &str) {
        let claims = self.claims();
        eventually(&format!("claim {claim}: {class} current, nothing in progress"), TIMEOUT, || async {
            let Ok(pvc) = claims.get(claim).await else { return false };
            let status = pvc.status.unwrap_or_default();
            status.current_volume_attributes_class_name.as_deref() == Some(class)
                && status.modify_volume_status.is_none()
        })
        .await;
    }

    /// Waits until `status.modifyVolumeStatus` is `{target, status}`.
    pub async fn wait_for_modify_status(&self, claim: &str, target: Option<&str>, status: &str) {
        let claims = self.claims();
        eventually(&format!("claim {claim}: modifyVolumeStatus {target:?} {status}"), TIMEOUT, || async {
            let Ok(pvc) = claims.get(claim).await else { return false };
            let modify = pvc.status.and_then(|s| s.modify_volume_status);
            modify.is_some_and(|m| m.status == status && m.target_volume_attributes_class_name.as_deref() == target)
        })
        .await;
    }

    pub fn backend_parameter(&self, volume_id: &str, key: &str) -> Option<String> {
        let volume = self.backend_volume(volume_id);
        volume["volume_context"][format!("{}/{key}", "hostpath.csi.k8s.io")].as_str().map(str::to_string)
    }
}

impl std::ops::Deref for ResizerWorld {
    type Target = DriverWorld;

    fn deref(&self) -> &DriverWorld {
        &self.base
    }
}

impl std::ops::DerefMut for ResizerWorld {
    fn deref_mut(&mut self) -> &mut DriverWorld {
        &mut self.base
    }
}

impl Drop for ResizerWorld {
    fn drop(&mut self) {
        // Cluster-scoped leftovers: our PVs (Retain), the StorageClass and the VolumeAttributesClasses.
        let volumes = std::mem::take(&mut self.volumes);
        let attribute_classes = std::mem::take(&mut self.attribute_classes);
        let class = self.ns().to_string();
        crate::control_plane::cluster::clean_up(move |client| async move {
            let pvs: Api<PersistentVolume> = Api::all(client.clone());
            for name in &volumes {
                let _ = pvs.delete(name, &DeleteParams::default()).await;
            }
            let _ = Api::<StorageClass>::all(client.clone()).delete(&class, &DeleteParams::default()).await;
            let classes: Api<VolumeAttributesClass> = Api::all(client);
            for name in &attribute_classes {
                let _ = classes.delete(name, &DeleteParams::default()).await;
            }
        });
    }
}
