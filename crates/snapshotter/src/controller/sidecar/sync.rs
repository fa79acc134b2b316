//! One sync of a content, in the order [`crate::translate::sidecar`] documents: the step from
//! [`sync_step`], then the writes and driver calls of that step. Each write answers with the content as stored, and
//! the next rule is applied to that, so one sync can carry a deletion from DeleteSnapshot to the finalizer.

use std::sync::Arc;

use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::is_not_found;
use sidecar_runtime::time::now;
use snapshot_api::{VolumeSnapshotClass, VolumeSnapshotContent};

use super::Shared;
use super::writes::write_failed;
use crate::translate::sidecar::content::content_name;
use crate::translate::sidecar::creation::create_plan;
use crate::translate::sidecar::deletion::{DeletionFailure, DeletionStep, deletion_failed_event, snapshot_deleted};
use crate::translate::sidecar::filter::handles_content;
use crate::translate::sidecar::outcome::{
    Described, Failed, Phase, SnapshotInfo, create_snapshot_answered, create_snapshot_failed, snapshot_described,
    step_failed,
};
use crate::translate::sidecar::readiness::{ReadinessCheck, listed, readiness_check};
use crate::translate::sidecar::sync::{SyncStep, sync_step};

/// How many deletion steps one sync takes at most: DeleteSnapshot, the status, the finalizer.
const DELETION_STEPS: usize = 3;

/// One sync of the content named `name`.
pub(super) async fn sync(shared: Arc<Shared>, name: String) -> Outcome {
    let shared = &*shared;
    let Some(content) = shared.stores.content(&name) else { return Outcome::Done };
    let class = content.spec.volume_snapshot_class_name.as_deref().and_then(|c| shared.stores.class(c));
    let snapshotter = &shared.options.snapshotter;
    if !handles_content(&content, class.as_deref(), &snapshotter.driver_name) {
        return Outcome::Done;
    }
    let content = (*content).clone();
    let step = sync_step(&content);
    tracing::debug!(content = name.as_str(), ?step, "syncing content");
    match step {
        SyncStep::Delete(step) => delete(shared, content, step).await,
        SyncStep::Create => create(shared, content, class.as_deref(), Phase::Create).await,
        SyncStep::PollByCreate => create(shared, content, class.as_deref(), Phase::Poll).await,
        SyncStep::PollByList => poll_by_list(shared, content, class.as_deref()).await,
        SyncStep::DropBeingCreated(patch) => match shared.patch_content(&content, &patch).await {
            Ok(_) => Outcome::Done,
            Err(err) => write_failed(&name, "removing the being-created annotation", &err),
        },
        SyncStep::Nothing => Outcome::Done,
    }
}

/// CreateSnapshot: the first call (`Phase::Create`), or again while the snapshot is not ready (`Phase::Poll`).
/// The being-created annotation is stored before the call: a crash after the driver cut the snapshot leaves it
/// there, deletion waits, and the next sync asks again under the same name, which returns the same snapshot.
async fn create(
    shared: &Shared,
    content: VolumeSnapshotContent,
    class: Option<&VolumeSnapshotClass>,
    phase: Phase,
) -> Outcome {
    let name = content_name(&content);
    let plan = match create_plan(&shared.options.snapshotter, &content, class) {
        Ok(plan) => plan,
        Err(refusal) => {
            tracing::warn!(content = %name, error = %refusal, "cannot create snapshot");
            let failed = step_failed(&content, phase, &refusal.to_string(), now());
            return write_failure(shared, content, failed).await;
        }
    };
    let secrets = match shared.secret_data(plan.call.secret.as_ref()).await {
        Ok(secrets) => secrets,
        Err(error) => {
            tracing::warn!(content = %name, %error, "cannot read the snapshotter secret");
            let failed = step_failed(&content, phase, &error, now());
            return write_failure(shared, content, failed).await;
        }
    };
    let content = match &plan.mark_being_created {
        Some(mark) => match shared.patch_content(&content, mark).await {
            Ok(marked) => marked,
            Err(err) => return write_failed(&name, "storing the being-created annotation", &err),
        },
        None => content,
    };
    let mut request = plan.call.request;
    request.secrets = secrets;
    tracing::info!(content = %name, snapshot = %request.name, volume = %request.source_volume_id, "CreateSnapshot");
    match shared.csi.create_snapshot(request).await {
        Ok(response) => {
            let snapshot = response.snapshot.unwrap_or_default();
            let info = SnapshotInfo::from_csi(&snapshot, now_ns());
            match create_snapshot_answered(&content, phase, &info, now()) {
                Ok(described) => write_described(shared, content, described).await,
                Err(failed) => {
                    tracing::warn!(content = %name, error = %failed.event.message, "CreateSnapshot answer refused");
                    write_failure(shared, content, *failed).await
                }
            }
        }
        Err(error) => {
            tracing::warn!(content = %name, %error, "CreateSnapshot failed");
            let failed = create_snapshot_failed(&content, phase, &error, now());
            write_failure(shared, content, failed).await
        }
    }
}

/// Readiness of a pre-provisioned content or a group member: ListSnapshots, or the driver's word without it.
async fn poll_by_list(shared: &Shared, content: VolumeSnapshotContent, class: Option<&VolumeSnapshotClass>) -> Outcome {
    let name = content_name(&content);
    let check = match readiness_check(&shared.options.snapshotter, &content, class, now_ns()) {
        Ok(check) => check,
        Err(error) => {
            let failed = step_failed(&content, Phase::Poll, &error, now());
            return write_failure(shared, content, failed).await;
        }
    };
    let info = match check {
        ReadinessCheck::AssumeReady(info) => info,
        ReadinessCheck::List(call) => {
            let secrets = match shared.secret_data(call.secret.as_ref()).await {
                Ok(secrets) => secrets,
                Err(error) => {
                    let failed = step_failed(&content, Phase::Poll, &error, now());
                    return write_failure(shared, content, failed).await;
                }
            };
            let snapshot_id = call.request.snapshot_id.clone();
            let mut request = call.request;
            request.secrets = secrets;
            let answer = shared.csi.list_snapshots(request).await.map_err(|e| e.go_text());
            match answer.and_then(|response| listed(&response, &snapshot_id, now_ns())) {
                Ok(info) => info,
                Err(error) => {
                    tracing::warn!(content = %name, %error, "ListSnapshots failed");
                    let failed = step_failed(&content, Phase::Poll, &error, now());
                    return write_failure(shared, content, failed).await;
                }
            }
        }
    };
    let described = snapshot_described(&content, &info);
    write_described(shared, content, described).await
}

/// The writes after the driver described the snapshot: the status, then the annotation; again later while the
/// snapshot is not ready.
async fn write_described(shared: &Shared, content: VolumeSnapshotContent, described: Described) -> Outcome {
    let name = content_name(&content);
    let mut content = content;
    if let Some(status) = &described.status {
        match shared.patch_status(&content, status).await {
            Ok(stored) => content = stored,
            Err(err) => return write_failed(&name, "writing the snapshot status", &err),
        }
    }
    if let Some(drop) = &described.drop_being_created {
        match shared.patch_content(&content, drop).await {
            Ok(stored) => content = stored,
            Err(err) => return write_failed(&name, "removing the being-created annotation", &err),
        }
    }
    // A deletion that waited for the driver's answer goes on now, on the content as stored: the annotation's
    // removal alone is no event worth a sync (#1392), and the cache may not hold it yet.
    if let SyncStep::Delete(step) = sync_step(&content) {
        return delete(shared, content, step).await;
    }
    if described.requeue {
        tracing::debug!(content = %name, "snapshot not ready yet");
        return Outcome::Retry;
    }
    Outcome::Done
}

/// The writes after a failed step: the annotation (only after a final CreateSnapshot error), the status error,
/// the event; then retry with backoff.
async fn write_failure(shared: &Shared, content: VolumeSnapshotContent, failed: Failed) -> Outcome {
    let name = content_name(&content);
    let mut content = content;
    if let Some(drop) = &failed.drop_being_created {
        match shared.patch_content(&content, drop).await {
            Ok(stored) => content = stored,
            Err(err) => return write_failed(&name, "removing the being-created annotation", &err),
        }
    }
    if let Some(status) = &failed.status {
        match shared.patch_status(&content, status).await {
            Ok(stored) => content = stored,
            Err(err) => tracing::warn!(content = %name, error = %err, "recording the error in the status failed"),
        }
    }
    shared.publish(&content, &failed.event).await;
    Outcome::Retry
}

/// The steps of a deletion, each on the content as the last one stored it.
async fn delete(shared: &Shared, content: VolumeSnapshotContent, step: DeletionStep) -> Outcome {
    let name = content_name(&content);
    let mut content = content;
    let mut step = step;
    for _ in 0..DELETION_STEPS {
        match step {
            DeletionStep::Done => return Outcome::Done,
            DeletionStep::RemoveFinalizer(patch) => {
                return match shared.patch_content(&content, &patch).await {
                    Ok(_) => {
                        tracing::info!(content = %name, "snapshot content released");
                        Outcome::Done
                    }
                    Err(err) if is_not_found(&err) => Outcome::Done,
                    Err(err) => write_failed(&name, "removing the bound-protection finalizer", &err),
                };
            }
            DeletionStep::DeleteSnapshot(call) => {
                let secrets = match shared.secret_data(call.secret.as_ref()).await {
                    Ok(secrets) => secrets,
                    Err(error) => {
                        tracing::warn!(content = %name, %error, "cannot read the deletion secret");
                        return deletion_failed(shared, &content, DeletionFailure::Secret).await;
                    }
                };
                let mut request = call.request;
                request.secrets = secrets;
                tracing::info!(content = %name, snapshot = %request.snapshot_id, "DeleteSnapshot");
                if let Err(error) = shared.csi.delete_snapshot(request).await {
                    tracing::warn!(content = %name, %error, "DeleteSnapshot failed");
                    return deletion_failed(shared, &content, DeletionFailure::Driver).await;
                }
                content = match shared.patch_status(&content, &snapshot_deleted(&content)).await {
                    Ok(stored) => stored,
                    Err(error) => {
                        tracing::warn!(content = %name, %error, "clearing the status after DeleteSnapshot failed");
                        return deletion_failed(shared, &content, DeletionFailure::StatusClear).await;
                    }
                };
                step = crate::translate::sidecar::deletion::deletion_step(&content);
            }
        }
    }
    Outcome::Retry
}

async fn deletion_failed(shared: &Shared, content: &VolumeSnapshotContent, failure: DeletionFailure) -> Outcome {
    shared.publish(content, &deletion_failed_event(failure)).await;
    Outcome::Retry
}

/// Now in nanoseconds since the Unix epoch, the unit of a content's `creationTime`.
fn now_ns() -> i64 {
    i64::try_from(k8s_openapi::jiff::Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX)
}
