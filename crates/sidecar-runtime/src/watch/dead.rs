//! Watches that ended for good. A cache whose reflector is gone keeps what it last held while the world moves on, so
//! it must not stay silent: a reflector that panicked ends the process (exit 1), as upstream's would (client-go's
//! `runtime.HandleCrash` re-panics and the kubelet restarts the container), and a dead cache makes `/healthz` fail
//! for as long as the process lives.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;

use futures::FutureExt;

/// Why each dead cache died, in the order they did.
static DEAD: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The first dead cache's reason, for `/healthz`: `None` while every watch lives.
pub fn dead_watch() -> Option<String> {
    DEAD.lock().unwrap_or_else(|p| p.into_inner()).first().cloned()
}

/// Why a reflector of `kind` that ended (an aborted one, stopped because nobody listens, never gets here) left its
/// cache dead, and whether the process must exit: a panic is fatal, an end is not.
fn ending(kind: &str, outcome: Result<(), Box<dyn Any + Send>>) -> (String, bool) {
    match outcome {
        Ok(()) => (format!("the watch of {kind} ended; its cache is no longer updated"), false),
        Err(payload) => {
            let message = crate::supervise::panic_message(payload);
            (format!("the watch of {kind} panicked: {message}"), true)
        }
    }
}

/// Runs the reflector `watch` of `kind`; when it ends on its own its cache is marked dead, and when it panics the
/// process exits 1.
pub(super) async fn guard(kind: String, watch: impl Future<Output = ()>) {
    if let Some(reason) = watched(&DEAD, &kind, watch).await {
        eprintln!("error: {reason}, exiting");
        std::process::exit(1);
    }
}

/// Runs `watch`; once it ends, adds why to `dead` and returns the reason when it is fatal (a panic).
async fn watched(dead: &Mutex<Vec<String>>, kind: &str, watch: impl Future<Output = ()>) -> Option<String> {
    let outcome = AssertUnwindSafe(watch).catch_unwind().await;
    let (reason, fatal) = ending(kind, outcome);
    tracing::error!(kind = %kind, "{reason}");
    dead.lock().unwrap_or_else(|p| p.into_inner()).push(reason.clone());
    fatal.then_some(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_fatal_and_named_an_end_is_not() {
        let panicked = std::panic::catch_unwind(|| panic!("slim conversion of {}", "claim a")).map(|_: ()| ());
        assert_eq!(
            ending("PersistentVolumeClaim", panicked),
            ("the watch of PersistentVolumeClaim panicked: slim conversion of claim a".to_string(), true)
        );
        let text = std::panic::catch_unwind(|| std::panic::panic_any(7_u8)).map(|_: ()| ());
        assert_eq!(ending("Pod", text).0, "the watch of Pod panicked: (no message)");
        assert_eq!(
            ending("PersistentVolume", Ok(())),
            ("the watch of PersistentVolume ended; its cache is no longer updated".to_string(), false)
        );
    }

    #[tokio::test]
    async fn an_ended_watch_is_recorded_and_a_panicked_one_is_fatal() {
        let dead = Mutex::new(Vec::new());
        assert_eq!(watched(&dead, "VolumeAttachment", async {}).await, None);
        let fatal = watched(&dead, "Pod", async { panic!("handler bug") }).await;
        assert_eq!(fatal.as_deref(), Some("the watch of Pod panicked: handler bug"));
        let dead = dead.into_inner().unwrap();
        assert_eq!(
            dead,
            [
                "the watch of VolumeAttachment ended; its cache is no longer updated",
                "the watch of Pod panicked: handler bug"
            ]
        );
    }

    #[tokio::test]
    async fn healthz_fails_while_a_cache_is_dead() {
        let ok: Vec<crate::http::HealthCheck> = Vec::new();
        assert_eq!(crate::http::health_answer(&ok, None).await, (axum::http::StatusCode::OK, "ok".to_string()));
        let reason = "the watch of Pod panicked: handler bug".to_string();
        let answer = crate::http::health_answer(&ok, Some(reason.clone())).await;
        assert_eq!(answer, (axum::http::StatusCode::INTERNAL_SERVER_ERROR, reason));
    }
}
