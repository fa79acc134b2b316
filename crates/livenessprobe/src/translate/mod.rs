//! livenessprobe's rules without I/O. There is one: [`startup`], what the flags ask for (where `/healthz` and the
//! metrics are served) or which flags conflict. What `/healthz` answers for a Probe is the shared rule of
//! `sidecar_runtime::http::driver_health_router`.

pub mod startup;
