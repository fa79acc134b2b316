//! At startup the snapshot-controller waits for the snapshot CRDs (external-snapshotter
//! cmd/snapshot-controller/main.go, ensureCustomResourceDefinitionsExist): it lists each kind with `limit=1` until
//! that works, backing off from 100 ms by 1.5 (at least 1 s between tries) for at most
//! `--retry-crd-interval-max`, then gives up. The one-item list keeps the check cheap with many snapshots.

use std::time::Duration;

use kube::Api;
use kube::api::ListParams;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent};

/// The CRDs were not served in time.
#[derive(Debug, thiserror::Error)]
#[error("the snapshot CRDs are not served (waited {waited:?}): {error}")]
pub struct CrdsMissing {
    pub waited: Duration,
    pub error: String,
}

/// The waits between tries: 100 ms growing by 1.5, never under 1 s, until their sum would pass `max`.
pub fn retry_waits(max: Duration) -> Vec<Duration> {
    let mut waits = Vec::new();
    let (mut step, mut total) = (Duration::from_millis(100), Duration::ZERO);
    loop {
        let wait = step.max(Duration::from_secs(1));
        if total + wait > max {
            return waits;
        }
        total += wait;
        waits.push(wait);
        step = step.mul_f64(1.5);
    }
}

pub async fn wait_for_crds(client: &kube::Client, max: Duration) -> Result<(), CrdsMissing> {
    let mut waits = retry_waits(max).into_iter();
    let mut waited = Duration::ZERO;
    loop {
        let error = match list_each(client).await {
            Ok(()) => return Ok(()),
            Err(err) => err.to_string(),
        };
        let Some(wait) = waits.next() else { return Err(CrdsMissing { waited, error }) };
        tracing::info!(%error, "waiting for the snapshot CRDs");
        tokio::time::sleep(wait).await;
        waited += wait;
    }
}

async fn list_each(client: &kube::Client) -> Result<(), kube::Error> {
    let one = ListParams::default().limit(1);
    Api::<VolumeSnapshot>::all(client.clone()).list_metadata(&one).await?;
    Api::<VolumeSnapshotClass>::all(client.clone()).list_metadata(&one).await?;
    Api::<VolumeSnapshotContent>::all(client.clone()).list_metadata(&one).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_from_one_second_within_the_maximum() {
        let s = Duration::from_secs;
        // (max, waits)
        let table: [(Duration, Vec<Duration>); 3] = [
            (s(0), vec![]),
            (s(3), vec![s(1), s(1), s(1)]),
            // 100 ms × 1.5^n stays under 1 s for six tries, then 1.139 s, 1.709 s, 2.563 s … while the sum stays within 30 s
            (s(30), {
                let mut w = vec![s(1); 6];
                w.extend(
                    [1.1390625, 1.70859375, 2.562890625, 3.8443359375, 5.76650390625, 8.649755859375]
                        .map(Duration::from_secs_f64),
                );
                w
            }),
        ];
        for (max, want) in table {
            let waits = retry_waits(max);
            assert_eq!(waits.len(), want.len(), "{max:?}: {waits:?}");
            for (got, want) in waits.iter().zip(&want) {
                assert!(got.abs_diff(*want) < Duration::from_millis(1), "{max:?}: {got:?} vs {want:?}");
            }
            assert!(waits.iter().sum::<Duration>() <= max);
        }
    }
}
