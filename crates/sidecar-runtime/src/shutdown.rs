//! Orderly shutdown on SIGTERM / SIGINT: one cancellation token the runtime
//! hands to every controller. Controllers stop taking new work when it fires and
//! finish what is in flight; the runtime bounds how long that may take.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The process-wide "please stop" signal. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// A signal that only fires when [`Shutdown::trigger`] is called.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Fires on the first SIGTERM or SIGINT. A second one ends the process at
    /// once with status 1, for an operator who does not want to wait for the
    /// drain. Must be called inside a tokio runtime.
    pub fn on_signals() -> Shutdown {
        let shutdown = Shutdown::new();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            let signal = termination_signal().await;
            tracing::info!(signal, "shutting down: no new work is started, in-flight work may finish");
            trigger.trigger();
            let signal = termination_signal().await;
            tracing::warn!(signal, "second signal, exiting without waiting");
            std::process::exit(1);
        });
        shutdown
    }

    pub fn trigger(&self) {
        self.token.cancel();
    }

    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Completes once shutdown was requested.
    pub async fn triggered(&self) {
        self.token.cancelled().await
    }

    /// The token to hand to controllers and queues. Cancelling a child does not
    /// cancel the process-wide token.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Runs `work` to completion, but once shutdown is requested waits at most
    /// `drain` more. `None` means the drain deadline cut it short.
    pub async fn drain<F: Future>(&self, work: F, drain: Duration) -> Option<F::Output> {
        tokio::pin!(work);
        tokio::select! {
            output = &mut work => return Some(output),
            _ = self.triggered() => {}
        }
        match tokio::time::timeout(drain, work).await {
            Ok(output) => Some(output),
            Err(_) => {
                tracing::warn!(?drain, "in-flight work did not finish within the shutdown deadline");
                None
            }
        }
    }

    /// Runs `work` unless shutdown is requested first (then `work` is dropped): for waits with nothing in flight,
    /// such as waiting for the driver at start.
    pub async fn unless_triggered<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            output = work => Some(output),
            _ = self.triggered() => None,
        }
    }
}

/// The name of the first SIGTERM or SIGINT to arrive.
async fn termination_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGTERM; only SIGINT stops the process gracefully");
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT";
        }
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn drain_lets_work_finish_then_cuts_it_off() {
        let shutdown = Shutdown::new();
        assert_eq!(shutdown.drain(async { 7 }, Duration::from_secs(1)).await, Some(7));

        shutdown.trigger();
        assert!(shutdown.is_triggered());
        let quick = shutdown.drain(tokio::time::sleep(Duration::from_millis(500)), Duration::from_secs(1));
        assert_eq!(quick.await, Some(()));
        let slow = shutdown.drain(tokio::time::sleep(Duration::from_secs(5)), Duration::from_secs(1));
        assert_eq!(slow.await, None);
    }

    #[tokio::test]
    async fn tokens_follow_the_trigger() {
        let shutdown = Shutdown::new();
        let token = shutdown.token();
        let child = token.child_token();
        child.cancel();
        assert!(!shutdown.is_triggered(), "a child does not stop the process");
        shutdown.trigger();
        token.cancelled().await;
        shutdown.triggered().await;
    }
}
