//! Several sidecars in one process (`csi-sidecars`), and one alone (the single binaries), run the same way: each
//! sidecar's controllers are a [`SidecarLoop`], and [`supervise`] runs them as tasks until they end.
//!
//! A container stops when its sidecar fails, and the kubelet restarts it. In one process for several sidecars the
//! same must hold: if one of them panics, loses its Lease or stops on its own while the others still work, the whole
//! process stops with a message naming it, rather than going on with a part missing ([`SidecarFailure`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

type Controllers = Box<dyn FnOnce(CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// One sidecar's controllers, ready to run: what a sidecar crate's `start` returns.
pub struct SidecarLoop {
    /// `provisioner`, `resizer`, `snapshotter`, `group-snapshotter`: how messages name it.
    pub name: String,
    /// Its upstream Lease name.
    pub lease: String,
    /// How long its in-flight work may go on after SIGTERM (its `--timeout`).
    pub drain: Duration,
    controllers: Controllers,
}

impl SidecarLoop {
    /// `controllers` runs until the token it gets fires, then returns once its in-flight work has finished.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        lease: impl Into<String>,
        drain: Duration,
        controllers: F,
    ) -> SidecarLoop
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        SidecarLoop {
            name: name.into(),
            lease: lease.into(),
            drain,
            controllers: Box::new(move |stop| Box::pin(controllers(stop))),
        }
    }
}

/// Why a process running several sidecars must stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SidecarFailure {
    #[error("sidecar {0}: leader election lost")]
    LeadershipLost(String),
    #[error("sidecar {sidecar} panicked: {message}")]
    Panicked { sidecar: String, message: String },
    #[error("sidecar {0} stopped while the others were running")]
    Stopped(String),
}

impl SidecarFailure {
    /// Logs the failure and exits 1 at once, without waiting for the other sidecars' in-flight work: that is what
    /// a container does when its process ends, and a lost Lease means another replica may already be acting.
    pub fn exit(self) -> ! {
        tracing::error!("{self}, exiting");
        eprintln!("error: {self}");
        std::process::exit(1)
    }
}

/// Runs `loops` as tasks until `stop` fires and each has returned. Fails as soon as one panics, or returns while
/// `stop` has not fired and others are still running (`alone` false: a single sidecar returning early ends its
/// process as it always did, without an error).
pub async fn supervise(loops: Vec<SidecarLoop>, stop: CancellationToken, alone: bool) -> Result<(), SidecarFailure> {
    let mut tasks = tokio::task::JoinSet::new();
    let mut names = HashMap::new();
    for sidecar in loops {
        let handle = tasks.spawn((sidecar.controllers)(stop.clone()));
        names.insert(handle.id(), sidecar.name);
    }
    while let Some(ended) = tasks.join_next_with_id().await {
        let (id, result) = match ended {
            Ok((id, ())) => (id, Ok(())),
            Err(err) => (err.id(), Err(err)),
        };
        let name = names.remove(&id).unwrap_or_default();
        match result {
            Err(err) if err.is_panic() => {
                let message = panic_message(err.into_panic());
                return Err(SidecarFailure::Panicked { sidecar: name, message });
            }
            Err(_) => return Err(SidecarFailure::Stopped(name)),
            Ok(()) if !stop.is_cancelled() && !alone => return Err(SidecarFailure::Stopped(name)),
            Ok(()) => tracing::info!(sidecar = %name, "stopped"),
        }
    }
    Ok(())
}

/// The sidecars' names, comma-separated (as `--sidecars` takes them).
pub(crate) fn names(loops: &[SidecarLoop]) -> String {
    loops.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(",")
}

/// A panic's message, when it carried one (`panic!` with text does).
pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => payload.downcast::<&str>().map(|m| m.to_string()).unwrap_or_else(|_| "(no message)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn until_stopped(name: &str) -> SidecarLoop {
        SidecarLoop::new(name, "lease", Duration::ZERO, |stop: CancellationToken| async move { stop.cancelled().await })
    }

    fn returns_at_once(name: &str) -> SidecarLoop {
        SidecarLoop::new(name, "lease", Duration::ZERO, |_| async {})
    }

    fn panics(name: &str) -> SidecarLoop {
        SidecarLoop::new(name, "lease", Duration::ZERO, |_| async {
            tokio::task::yield_now().await;
            panic!("volume table corrupt")
        })
    }

    /// (case, sidecars, alone, expected)
    type Row = (&'static str, Vec<SidecarLoop>, bool, Result<(), SidecarFailure>);

    #[tokio::test]
    async fn a_failing_sidecar_stops_the_process_and_is_named() {
        let table: Vec<Row> = vec![
            (
                "one panics among others",
                vec![until_stopped("provisioner"), panics("resizer")],
                false,
                Err(SidecarFailure::Panicked { sidecar: "resizer".into(), message: "volume table corrupt".into() }),
            ),
            (
                "one returns while the others work",
                vec![returns_at_once("snapshotter"), until_stopped("resizer")],
                false,
                Err(SidecarFailure::Stopped("snapshotter".into())),
            ),
            (
                "a single sidecar panicking",
                vec![panics("provisioner")],
                true,
                Err(SidecarFailure::Panicked { sidecar: "provisioner".into(), message: "volume table corrupt".into() }),
            ),
            ("a single sidecar returning ends its process quietly", vec![returns_at_once("resizer")], true, Ok(())),
        ];
        for (case, loops, alone, expected) in table {
            let stop = CancellationToken::new();
            let result = tokio::time::timeout(Duration::from_secs(5), supervise(loops, stop, alone)).await;
            assert_eq!(result, Ok(expected), "{case}");
        }
    }

    #[tokio::test]
    async fn every_sidecar_stops_on_shutdown() {
        let stop = CancellationToken::new();
        let running = tokio::spawn(supervise(vec![until_stopped("a"), until_stopped("b")], stop.clone(), false));
        tokio::task::yield_now().await;
        stop.cancel();
        assert_eq!(running.await.unwrap(), Ok(()));
    }

    #[test]
    fn the_message_names_the_sidecar() {
        let lost = SidecarFailure::LeadershipLost("resizer".into());
        assert_eq!(lost.to_string(), "sidecar resizer: leader election lost");
    }
}
