//! `provision_cached` and `provision_cached_combined`: provisioning among the `idle` world's N Bound claims and PVs,
//! with the provisioner and the resizer both running, as a driver's controller pod runs them. Each sidecar caches
//! every claim and PV, so this is what provisioning costs a user with a large cluster: as two processes, ours and
//! upstream's (CPU and peak RSS added up, as in `snapshot`), and ours as one `csi-sidecars` process whose two
//! sidecars share their caches. M new Immediate claims at once; `per s` = M / time until every new PV exists; then
//! the new claims deleted, `delete_s` until their PVs and backend volumes are gone (the cached ones stay).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::report::Run;
use anyhow::Context;
use csi_sidecars_e2e::processes::scenario::Process;
use csi_sidecars_e2e::worlds::provisioner::claim;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};

use crate::idle::IdleWorld;
use crate::measure::{Measure, Watched, latencies};
use crate::progress;
use crate::sidecar::{Kind, Limits, Side};
use crate::tracker::{Tracker, create_all, timeout_for};

/// The label of the claims a round makes (the cached ones have none), so that only they are deleted.
const NEW_LABEL: &str = "bench.csi-sidecars/new";

/// The new claims' names start with this; the cached ones are `c-…`.
const NEW_PREFIX: &str = "p-";

/// How the provisioner and the resizer run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// Two processes of `side`, each with its own caches and ServiceAccount.
    Separate(Side),
    /// Ours as one process with one ServiceAccount (the two sidecars' rules together).
    Combined,
}

/// A PV made for one of the round's new claims (not one of the cached ones, which also name a claim of the
/// namespace); seen at all is done.
fn new_pv(pv: &PersistentVolume, namespace: &str) -> Option<(String, bool)> {
    let claim = pv.spec.as_ref()?.claim_ref.as_ref()?;
    let name = claim.name.as_deref()?;
    (claim.namespace.as_deref() == Some(namespace) && name.starts_with(NEW_PREFIX)).then(|| (name.to_string(), true))
}

impl IdleWorld {
    /// The Immediate StorageClass (Delete policy) of the world's driver that the new claims name.
    pub async fn provisioning_class(&self) -> anyhow::Result<String> {
        let world = &self.world.base;
        let name = format!("{}-new", world.ns());
        let class = StorageClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            provisioner: world.driver.clone(),
            reclaim_policy: Some("Delete".into()),
            volume_binding_mode: Some("Immediate".into()),
            ..Default::default()
        };
        let classes: Api<StorageClass> = Api::all(world.client.clone());
        if let Err(err) = classes.create(&PostParams::default(), &class).await {
            anyhow::ensure!(matches!(&err, kube::Error::Api(s) if s.code == 409), "create StorageClass: {err}");
        }
        Ok(name)
    }

    /// Deletes the class [`IdleWorld::provisioning_class`] made (cluster-scoped: the namespace does not take it along).
    pub async fn remove_provisioning_class(&self, class: &str) {
        let classes: Api<StorageClass> = Api::all(self.world.base.client.clone());
        if let Err(err) = classes.delete(class, &DeleteParams::default()).await {
            progress(&format!("  StorageClass {class} left behind: {err}"));
        }
    }

    /// One round: `setup` started among the cached objects, `count` claims of `class` provisioned, then deleted.
    pub async fn provision_cached(
        &mut self,
        setup: Setup,
        limits: &Limits,
        class: &str,
        count: usize,
    ) -> anyhow::Result<Run> {
        let label = format!("{}-{}", setup_name(setup), limits.name);
        let started = Instant::now();
        let (processes, usernames) = match setup {
            Setup::Separate(side) => {
                let (provisioner_name, resizer_name) = (format!("{label}-provisioner"), format!("{label}-resizer"));
                let (provisioner, _) = self.start_one(&provisioner_name, Kind::Provisioner, side, limits).await?;
                let (resizer, _) = self.start_one(&resizer_name, Kind::Resizer, side, limits).await?;
                let resizer_user = self.world.base.identity.username().to_string();
                (vec![provisioner, resizer], vec![self.provisioner.username().to_string(), resizer_user])
            }
            Setup::Combined => {
                let (process, _) = self.start_combined(&label, limits, &[Kind::Provisioner, Kind::Resizer]).await?;
                (vec![process], vec![self.combined.username().to_string()])
            }
        };
        let ready_s = started.elapsed().as_secs_f64();
        let run = self.provision_new(&processes, usernames, class, count).await;
        for mut process in processes {
            process.terminate();
        }
        let mut run = run?;
        run.details.insert("ready_s".into(), ready_s);
        Ok(run)
    }

    /// The work of a round with `processes` running: the new claims made and provisioned, measured, deleted.
    async fn provision_new(
        &self,
        processes: &[Process],
        usernames: Vec<String>,
        class: &str,
        count: usize,
    ) -> anyhow::Result<Run> {
        let world = &self.world.base;
        let ns = world.ns().to_string();
        let pvs = Tracker::start(Api::<PersistentVolume>::all(world.client.clone()), &ns, new_pv).await;
        let watched = processes.iter().zip(usernames).map(|(process, username)| Watched { process, username });
        let measure = Measure::before(watched.collect()).await?;

        let t0 = Instant::now();
        let objects = (0..count).map(|i| {
            let mut object = claim(&format!("{NEW_PREFIX}{i:05}"), class, None, "ReadWriteOnce");
            object.metadata.labels = Some(BTreeMap::from([(NEW_LABEL.to_string(), "true".to_string())]));
            object
        });
        let created = create_all(&self.world.claims(), objects.collect()).await?;
        let asked: HashMap<String, Instant> =
            created.into_iter().map(|(claim, at)| (claim.metadata.name.unwrap_or_default(), at)).collect();
        let last_pv = pvs.all_done(count, "new PVs created", timeout_for(count)).await?;
        let seconds = last_pv.duration_since(t0).as_secs_f64();
        progress(&format!("  every new PV exists after {seconds:.1} s"));
        let mut run = measure.after(count, seconds, latencies(&asked, &pvs.done())).await?;

        let t_delete = Instant::now();
        let new_only = ListParams::default().labels(&format!("{NEW_LABEL}=true"));
        self.world.claims().delete_collection(&DeleteParams::default(), &new_only).await.context("delete claims")?;
        // The cached claims' PVs name no backend volume: every backend volume is a new one.
        crate::provision::all_gone(&pvs, &world.socket, count).await?;
        let delete_s = t_delete.elapsed().as_secs_f64();
        progress(&format!("  new claims deleted in {delete_s:.1} s"));
        run.details.insert("delete_s".into(), delete_s);
        Ok(run)
    }
}

fn setup_name(setup: Setup) -> &'static str {
    match setup {
        Setup::Separate(side) => side.name(),
        Setup::Combined => "combined",
    }
}
