//! What the command line asks the registrar to do, checked as upstream's `main` checks it, in the same order.

use crate::flags::Args;

/// The deprecated `--mode` under which the process exits 0 at once.
pub const MODE_REGISTRATION_PROBE: &str = "kubelet-registration-probe";

/// What to do after the flags are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Startup {
    /// `--mode=kubelet-registration-probe`: nothing; exit 0.
    ExitAsProbe,
    /// Register the driver; serve `/healthz` on `health_address` when there is one.
    Register { health_address: Option<String> },
}

/// A command line upstream refuses (it exits 1 with this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("kubelet-registration-path is a required parameter")]
    NoKubeletRegistrationPath,
    #[error("only one of `--health-port` and `--http-endpoint` can be set")]
    HealthPortAndHttpEndpoint,
}

/// The plan for `args`. `--health-port=N` (N > 0) listens on `:N`, every interface.
pub fn startup(args: &Args) -> Result<Startup, FlagError> {
    if args.kubelet_registration_path.is_empty() {
        return Err(FlagError::NoKubeletRegistrationPath);
    }
    if args.mode == MODE_REGISTRATION_PROBE {
        return Ok(Startup::ExitAsProbe);
    }
    if args.health_port > 0 && !args.http_endpoint.is_empty() {
        return Err(FlagError::HealthPortAndHttpEndpoint);
    }
    let health_address = match (args.health_port, args.http_endpoint.as_str()) {
        (port, _) if port > 0 => Some(format!(":{port}")),
        (_, "") => None,
        (_, endpoint) => Some(endpoint.to_string()),
    };
    Ok(Startup::Register { health_address })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let argv = ["registrar"].iter().chain(extra).copied();
        sidecar_runtime::flags::try_parse_from::<Args, _, _>(argv).unwrap()
    }

    #[test]
    fn plans_like_upstream() {
        let path = "--kubelet-registration-path=/var/lib/kubelet/plugins/d/csi.sock";
        let register = |address: Option<&str>| Ok(Startup::Register { health_address: address.map(String::from) });
        // (flags, plan)
        let table: [(&[&str], Result<Startup, FlagError>); 8] = [
            (&[], Err(FlagError::NoKubeletRegistrationPath)),
            // The path is checked before the probe mode, as upstream does.
            (&["--mode=kubelet-registration-probe"], Err(FlagError::NoKubeletRegistrationPath)),
            (
                &[path, "--mode=kubelet-registration-probe", "--health-port=1", "--http-endpoint=:2"],
                Ok(Startup::ExitAsProbe),
            ),
            (&[path], register(None)),
            (&[path, "--mode=registration"], register(None)),
            (&[path, "--health-port=9809"], register(Some(":9809"))),
            (&[path, "--http-endpoint=127.0.0.1:8080", "--health-port=0"], register(Some("127.0.0.1:8080"))),
            (&[path, "--health-port=9809", "--http-endpoint=:8080"], Err(FlagError::HealthPortAndHttpEndpoint)),
        ];
        for (flags, want) in table {
            assert_eq!(startup(&args(flags)), want, "{flags:?}");
        }
        assert_eq!(startup(&args(&[path, "--health-port=-1"])), register(None), "a negative port is off, as upstream");
    }
}
