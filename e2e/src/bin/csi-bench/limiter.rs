//! A token bucket like client-go's (qps, burst) for the ceiling's bare client, so it works under the same client
//! limits as the sidecars.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::report::Run;
use futures::StreamExt;
use tokio::sync::Mutex;

pub struct Limiter {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Limiter {
    /// A full bucket of `burst` tokens, refilled at `qps`.
    pub fn new(qps: f64, burst: u32) -> Limiter {
        Limiter { qps, burst: burst as f64, state: Mutex::new((burst as f64, Instant::now())) }
    }

    /// Takes one token, waiting for it if the bucket is empty (callers queue in reservation order).
    pub async fn acquire(&self) {
        let wait = {
            let mut state = self.state.lock().await;
            let now = Instant::now();
            let (tokens, last) = *state;
            let tokens = (tokens + now.duration_since(last).as_secs_f64() * self.qps).min(self.burst) - 1.0;
            *state = (tokens, now);
            (tokens < 0.0).then(|| Duration::from_secs_f64(-tokens / self.qps))
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
    }
}

/// A ceiling's round: the bare client does `write(item, limiter)` for every item, `concurrency` at a time, every
/// request of a write taking a token of one limiter of `limits`; seconds from the first write to the last answer,
/// and per item the time from the start to its last answer.
pub async fn bare_client<T, F, Fut>(
    items: Vec<T>,
    limits: &crate::sidecar::Limits,
    concurrency: usize,
    write: F,
) -> anyhow::Result<Run>
where
    F: Fn(T, Arc<Limiter>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let limiter = Arc::new(Limiter::new(limits.qps, limits.burst));
    let objects = items.len();
    let t0 = Instant::now();
    let answers: Vec<anyhow::Result<f64>> = futures::stream::iter(items)
        .map(|item| {
            let written = write(item, limiter.clone());
            async move {
                written.await?;
                Ok(t0.elapsed().as_secs_f64() * 1000.0)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let seconds = t0.elapsed().as_secs_f64();
    let latencies_ms = answers.into_iter().collect::<anyhow::Result<Vec<f64>>>()?;
    Ok(Run { objects, seconds, latencies_ms, ..Default::default() })
}
