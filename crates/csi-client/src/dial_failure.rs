//! Why a dial of the plugin's socket failed, named as the operating system names it, and when a sidecar waiting for
//! its driver says so.
//!
//! Upstream's sidecars log "Still connecting to unix:///…" every 10 s without the reason. Ours name the reason
//! (the socket is missing, nobody listens on it, or this user may not connect to it) at the first failure, again
//! at once when the reason changes, and otherwise at most every [`REPORT_EVERY`], so a sidecar that can never
//! connect says why within a second instead of staying silent.

use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

/// How often the same reason is logged again while the plugin stays unreachable.
pub const REPORT_EVERY: Duration = Duration::from_secs(5);
/// The least time between two lines, even when the reason changes at every attempt.
pub const MIN_GAP: Duration = Duration::from_secs(2);

/// What one dial got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialFailure {
    /// EACCES: the socket exists, but this process may not write to it (its owner, group and mode shut it out).
    PermissionDenied,
    /// ENOENT: no socket at that path yet (the driver has not started, or listens elsewhere).
    NoSuchFile,
    /// ECONNREFUSED: a socket file is there, but no process listens on it (a driver that exited).
    ConnectionRefused,
    /// Anything else: the error's own text.
    Other(String),
}

impl DialFailure {
    /// The failure named by the first `io::Error` in `error`'s source chain, else by the chain's text.
    pub fn of(error: &(dyn std::error::Error + 'static), text: &str) -> DialFailure {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(current) = source {
            if let Some(io) = current.downcast_ref::<io::Error>() {
                return DialFailure::of_io(io);
            }
            source = current.source();
        }
        DialFailure::Other(text.to_string())
    }

    pub fn of_io(error: &io::Error) -> DialFailure {
        match error.kind() {
            io::ErrorKind::PermissionDenied => DialFailure::PermissionDenied,
            io::ErrorKind::NotFound => DialFailure::NoSuchFile,
            io::ErrorKind::ConnectionRefused => DialFailure::ConnectionRefused,
            _ => DialFailure::Other(error.to_string()),
        }
    }

    /// The reason as a log line says it.
    pub fn name(&self) -> &str {
        match self {
            DialFailure::PermissionDenied => "permission denied",
            DialFailure::NoSuchFile => "no such file",
            DialFailure::ConnectionRefused => "connection refused",
            DialFailure::Other(text) => text,
        }
    }
}

/// The last line logged about a failing dial.
#[derive(Debug, Clone)]
pub struct Reported {
    pub at: Instant,
    pub failure: DialFailure,
}

/// Whether `failure`, seen at `now`, is logged after `last`: the first failure is, a new reason is (once
/// [`MIN_GAP`] has passed), the same reason again only after [`REPORT_EVERY`].
pub fn report_due(last: Option<&Reported>, failure: &DialFailure, now: Instant) -> bool {
    let Some(last) = last else { return true };
    let since = now.saturating_duration_since(last.at);
    if last.failure != *failure { since >= MIN_GAP } else { since >= REPORT_EVERY }
}

/// For a refused permission: who owns the socket, its mode, and who this process is, so the fix is plain from the
/// line (e.g. a root driver's 0755 socket and a sidecar run as 65532).
pub fn permission_detail(socket: &Path) -> String {
    let me = process_ids().map(|(uid, gid)| format!("this process runs as {uid}:{gid}")).unwrap_or_default();
    match std::fs::metadata(socket) {
        Ok(meta) => format!(
            "the socket is owned by {}:{} with mode {:04o} and connecting needs write permission on it; {me}",
            meta.uid(),
            meta.gid(),
            meta.permissions().mode() & 0o7777
        ),
        Err(error) => format!("the socket cannot be read ({error}); {me}"),
    }
}

/// The effective user and group of this process, from /proc/self/status.
fn process_ids() -> Option<(u32, u32)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let effective = |key: &str| -> Option<u32> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(2)?.parse().ok()
    };
    Some((effective("Uid:")?, effective("Gid:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_named_by_kind() {
        let table: [(io::ErrorKind, &str); 4] = [
            (io::ErrorKind::PermissionDenied, "permission denied"),
            (io::ErrorKind::NotFound, "no such file"),
            (io::ErrorKind::ConnectionRefused, "connection refused"),
            (io::ErrorKind::TimedOut, "timed out"),
        ];
        for (kind, name) in table {
            assert_eq!(DialFailure::of_io(&io::Error::from(kind)).name(), name, "{kind:?}");
        }
    }

    #[test]
    fn the_io_error_is_found_down_the_source_chain() {
        #[derive(Debug)]
        struct Wrapper(io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = Wrapper(io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(DialFailure::of(&wrapped, "transport error"), DialFailure::PermissionDenied);
        let plain = io::Error::other("handshake");
        assert_eq!(DialFailure::of(&plain, "x"), DialFailure::Other("handshake".into()));
    }

    #[test]
    fn lines_come_at_the_first_failure_a_new_reason_and_every_few_seconds() {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let last = |seconds: u64, failure: DialFailure| Reported { at: at(seconds), failure };
        let denied = DialFailure::PermissionDenied;
        let missing = DialFailure::NoSuchFile;
        // (last line, this failure, now, logged?)
        let table: [(Option<Reported>, &DialFailure, u64, bool); 7] = [
            (None, &denied, 0, true),
            (Some(last(0, denied.clone())), &denied, 1, false),
            (Some(last(0, denied.clone())), &denied, 4, false),
            (Some(last(0, denied.clone())), &denied, 5, true),
            (Some(last(0, missing.clone())), &denied, 1, false),
            (Some(last(0, missing.clone())), &denied, 2, true),
            (Some(last(3, missing.clone())), &missing, 9, true),
        ];
        for (row, (previous, failure, now, want)) in table.into_iter().enumerate() {
            assert_eq!(report_due(previous.as_ref(), failure, at(now)), want, "row {row}");
        }
    }

    #[test]
    fn the_permission_detail_names_owner_mode_and_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("csi.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o755)).unwrap();
        let detail = permission_detail(&socket);
        let (uid, gid) = process_ids().unwrap();
        assert!(detail.contains(&format!("owned by {uid}:{gid} with mode 0755")), "{detail}");
        assert!(detail.contains(&format!("this process runs as {uid}:{gid}")), "{detail}");
    }
}
