//! A token bucket like client-go's (qps, burst) for the ceiling's bare client, so it works under the same client
//! limits as the sidecars.

use std::time::{Duration, Instant};

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
