//! Logging to stderr (as klog does) through `tracing`, in text or JSON, with
//! klog's `-v` mapped onto tracing levels:
//!
//! | `-v`  | this project's crates | kube, tonic      | hyper, h2, tower, rustls |
//! |-------|-----------------------|------------------|--------------------------|
//! | 0–3   | info                  | info             | info                     |
//! | 4–5   | debug                 | info             | info                     |
//! | 6–7   | trace                 | debug            | info                     |
//! | 8+    | trace                 | trace            | debug                    |
//!
//! Upstream logs every CSI request and response at V(5) and HTTP requests at
//! V(6); csi-client logs CSI calls at debug and kube logs requests at debug, so
//! `-v=5` shows CSI calls and `-v=6` adds API requests, as with the Go images.
//! `RUST_LOG`, when set, replaces the mapping entirely.

use tracing_subscriber::EnvFilter;

use crate::flags::{CommonArgs, LoggingFormat, StandardArgs};

/// Libraries whose debug output is about the Kubernetes API or gRPC plumbing.
const CLIENT_LIBRARIES: &[&str] = &["kube", "kube_client", "kube_runtime", "tonic", "tower_http"];
/// Libraries whose debug output is about single connections and frames.
const TRANSPORT_LIBRARIES: &[&str] = &["hyper", "hyper_util", "h2", "tower", "rustls", "mio", "tokio_util"];

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("invalid log filter: {0}")]
    Filter(String),
    #[error("a global logger is already installed")]
    AlreadyInstalled,
}

/// The `EnvFilter` directives for a klog verbosity (see the table above).
pub fn filter_directives(verbosity: u32) -> String {
    let (ours, clients, transport) = match verbosity {
        0..=3 => ("info", "info", "info"),
        4..=5 => ("debug", "info", "info"),
        6..=7 => ("trace", "debug", "info"),
        _ => ("trace", "trace", "debug"),
    };
    let mut directives = vec![ours.to_string()];
    directives.extend(CLIENT_LIBRARIES.iter().map(|target| format!("{target}={clients}")));
    directives.extend(TRANSPORT_LIBRARIES.iter().map(|target| format!("{target}={transport}")));
    directives.join(",")
}

/// Installs the process-wide logger from `-v` and `--logging-format`.
pub fn init(args: &CommonArgs) -> Result<(), LoggingError> {
    init_standard(&args.standard)
}

/// [`init`] for a binary with the standard flags only (no Kubernetes client).
pub fn init_standard(args: &StandardArgs) -> Result<(), LoggingError> {
    init_with(args.verbosity, args.logging_format)
}

/// [`init`] without the flags struct.
pub fn init_with(verbosity: u32, format: LoggingFormat) -> Result<(), LoggingError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(custom) if !custom.is_empty() => EnvFilter::try_new(custom),
        _ => EnvFilter::try_new(filter_directives(verbosity)),
    }
    .map_err(|err| LoggingError::Filter(err.to_string()))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false);
    let installed = match format {
        LoggingFormat::Text => builder.try_init(),
        LoggingFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
    };
    installed.map_err(|_| LoggingError::AlreadyInstalled)?;
    if verbosity > 0 {
        tracing::debug!(verbosity, "log verbosity set");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The level the directives give `target`: its own directive, else the default.
    fn level_for(directives: &str, target: &str) -> String {
        let mut parts = directives.split(',');
        let default = parts.next().unwrap().to_string();
        parts.filter_map(|d| d.split_once('=')).find(|(t, _)| *t == target).map_or(default, |(_, l)| l.to_string())
    }

    #[test]
    fn verbosity_mapping() {
        let cases: &[(u32, &str, &str)] = &[
            (0, "csi_client", "info"),
            (2, "provisioner", "info"),
            (3, "sidecar_runtime", "info"),
            (4, "csi_client", "debug"),
            (5, "csi_client", "debug"),
            (5, "kube_client", "info"),
            (5, "h2", "info"),
            (6, "kube_client", "debug"),
            (6, "provisioner", "trace"),
            (6, "hyper", "info"),
            (8, "kube_client", "trace"),
            (8, "h2", "debug"),
            (10, "tower", "debug"),
        ];
        for (verbosity, target, expected) in cases {
            let directives = filter_directives(*verbosity);
            assert_eq!(level_for(&directives, target), *expected, "-v={verbosity} {target}: {directives}");
            assert!(EnvFilter::try_new(&directives).is_ok(), "{directives}");
        }
    }
}
