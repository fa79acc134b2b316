//! Running the controllers, with or without leadership.
//!
//! With leader election the order is client-go's: wait until this process
//! leads, start the controllers, keep renewing while they run. If renewal
//! fails the caller must stop everything at once ([`LeadershipLost`]; the
//! upstream sidecars exit 1), because another replica may already be acting. On
//! SIGTERM the controllers drain while the Lease is still renewed, and the Lease
//! is given up afterwards only if `ReleaseLeaderElectionOnExit` is on.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::leader_election::{LeaderElector, Renewal};
use crate::shutdown::Shutdown;

/// The `--feature-gates` name that makes a leader release its Lease on exit.
pub const RELEASE_LEADER_ELECTION_ON_EXIT: &str = "ReleaseLeaderElectionOnExit";

/// This process no longer holds the Lease: stop all work now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("leader election lost")]
pub struct LeadershipLost;

impl LeadershipLost {
    /// What the upstream sidecars do: log and exit with status 1, without
    /// waiting for in-flight work (another leader may already be running it).
    pub fn exit(self) -> ! {
        tracing::error!("leader election lost, exiting");
        std::process::exit(1)
    }
}

/// Runs `controllers` until they return; after shutdown is requested waits at
/// most `drain` for them. The token they get fires on shutdown.
pub async fn run_without_leader_election<F, Fut>(shutdown: &Shutdown, drain: Duration, controllers: F)
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    shutdown.drain(controllers(shutdown.token()), drain).await;
}

/// Waits to lead, then runs `controllers` while renewing the Lease. Returns
/// `Ok` after an orderly shutdown (or a shutdown before ever leading), and
/// [`LeadershipLost`] as soon as renewal fails.
pub async fn run_with_leader_election<F, Fut>(
    mut elector: LeaderElector,
    shutdown: &Shutdown,
    release_on_exit: bool,
    drain: Duration,
    controllers: F,
) -> Result<(), LeadershipLost>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    if !elector.acquire(&shutdown.token()).await {
        tracing::info!("shut down before becoming the leader");
        return Ok(());
    }

    let stop_renewing = CancellationToken::new();
    let renewing = {
        let stop = stop_renewing.clone();
        tokio::spawn(async move {
            let renewal = elector.keep_leading(&stop).await;
            (elector, renewal)
        })
    };
    tokio::pin!(renewing);

    let work = shutdown.drain(controllers(shutdown.token()), drain);
    tokio::pin!(work);
    tokio::select! {
        _ = &mut renewing => return Err(LeadershipLost),
        _ = &mut work => {}
    }

    stop_renewing.cancel();
    let Ok((mut elector, renewal)) = renewing.await else { return Err(LeadershipLost) };
    if renewal == Renewal::Lost {
        return Err(LeadershipLost);
    }
    if release_on_exit {
        let deadline = elector.config().renew_deadline;
        match tokio::time::timeout(deadline, elector.release()).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::warn!(error = %err, "failed to release the leader lease"),
            Err(_) => tracing::warn!("releasing the leader lease timed out"),
        }
    }
    Ok(())
}
