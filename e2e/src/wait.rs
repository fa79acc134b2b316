//! Bounded waiting: every wait in a test has a deadline and says what it
//! waited for when it runs out.

use std::future::Future;
use std::time::{Duration, Instant};

const POLL_EVERY: Duration = Duration::from_millis(200);

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if started.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Polls `check` until it returns true, or panics after `timeout` naming `what`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_for(what, timeout, || {
        let fut = check();
        async move { fut.await.then_some(()) }
    })
    .await
}
