//! Where livenessprobe serves, from its flags, checked as upstream's `main` checks them.

use crate::flags::{Args, DEFAULT_HEALTH_PORT};

/// The HTTP servers to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Servers {
    /// Where `/healthz` listens: `--http-endpoint`, else every IPv4 interface on `--health-port`.
    pub health_address: String,
    pub metrics: Metrics,
}

/// Where the metrics are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Metrics {
    /// Nowhere: only `--health-port` is in use.
    Off,
    /// On `--metrics-path` beside `/healthz` (with `--http-endpoint`).
    WithHealth { path: String },
    /// On a server of their own (the deprecated `--metrics-address`).
    Separate { address: String, path: String },
}

/// Flags upstream refuses together (it exits 1 with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("only one of `--health-port` and `--http-endpoint` can be explicitly set")]
    HealthPortAndHttpEndpoint,
    #[error("only one of `--metrics-address` and `--http-endpoint` can be explicitly set")]
    MetricsAddressAndHttpEndpoint,
}

/// `--health-port` counts as set when it differs from its default, as upstream tells.
pub fn servers(args: &Args) -> Result<Servers, FlagError> {
    let endpoint = args.http_endpoint.as_str();
    if args.health_port != DEFAULT_HEALTH_PORT && !endpoint.is_empty() {
        return Err(FlagError::HealthPortAndHttpEndpoint);
    }
    if !args.metrics_address.is_empty() && !endpoint.is_empty() {
        return Err(FlagError::MetricsAddressAndHttpEndpoint);
    }
    let health_address =
        if endpoint.is_empty() { format!("0.0.0.0:{}", args.health_port) } else { endpoint.to_string() };
    let path = args.metrics_path.clone();
    let metrics = match (args.metrics_address.as_str(), endpoint) {
        ("", "") => Metrics::Off,
        ("", _) => Metrics::WithHealth { path },
        (address, _) => Metrics::Separate { address: address.to_string(), path },
    };
    Ok(Servers { health_address, metrics })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(flags: &[&str]) -> Args {
        sidecar_runtime::flags::try_parse_from::<Args, _, _>(["livenessprobe"].iter().chain(flags).copied()).unwrap()
    }

    #[test]
    fn serves_where_upstream_does() {
        let serve = |health: &str, metrics: Metrics| Ok(Servers { health_address: health.to_string(), metrics });
        let with_health = |path: &str| Metrics::WithHealth { path: path.to_string() };
        let separate = |address: &str| Metrics::Separate { address: address.to_string(), path: "/metrics".to_string() };
        // (flags, servers)
        let table: [(&[&str], Result<Servers, FlagError>); 8] = [
            (&[], serve("0.0.0.0:9808", Metrics::Off)),
            (&["--health-port=9898"], serve("0.0.0.0:9898", Metrics::Off)),
            (&["--http-endpoint=:8080"], serve(":8080", with_health("/metrics"))),
            (&["--http-endpoint=:8080", "--metrics-path=/m"], serve(":8080", with_health("/m"))),
            // The default port given explicitly is not "set", as upstream compares with the default.
            (&["--http-endpoint=:8080", "--health-port=9808"], serve(":8080", with_health("/metrics"))),
            (&["--metrics-address=:9090"], serve("0.0.0.0:9808", separate(":9090"))),
            (&["--http-endpoint=:8080", "--health-port=9898"], Err(FlagError::HealthPortAndHttpEndpoint)),
            (&["--http-endpoint=:8080", "--metrics-address=:9090"], Err(FlagError::MetricsAddressAndHttpEndpoint)),
        ];
        for (flags, want) in table {
            assert_eq!(servers(&args(flags)), want, "{flags:?}");
        }
    }
}
