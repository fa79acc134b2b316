//! The shipped binaries, read from the sidecars' own descriptions (`sidecar_runtime::Description`, declared in each
//! sidecar's crate and registered in `csi_sidecars::sidecars::SIDECARS`): the image list, the flag reference, the
//! combined mode and the RBAC fixtures are derived from them.

use std::sync::LazyLock;

use sidecar_runtime::Description;

/// Every description: the sidecars `csi-sidecars` runs, in its order, then snapshot-controller (one per cluster,
/// never inside `csi-sidecars`).
pub fn descriptions() -> impl Iterator<Item = Description> {
    let sidecars = csi_sidecars::sidecars::SIDECARS.iter().map(|registered| registered.description);
    sidecars.chain([snapshot_binaries::snapshot_controller::DESCRIPTION])
}

/// The description of the binary `binary`.
pub fn description(binary: &str) -> Option<Description> {
    descriptions().find(|description| description.binary == binary)
}

/// The `--sidecars` name of a single-sidecar binary that the harness runs through `csi-sidecars` in combined mode:
/// every sidecar under a Lease. The node sidecars' binaries keep their own exits (the registrar's probe mode, which
/// `csi-sidecars` refuses), so the harness runs them as themselves.
pub fn combined_name(binary: &str) -> Option<&'static str> {
    let mut sidecars = csi_sidecars::sidecars::SIDECARS.iter().map(|registered| registered.description);
    sidecars.find(|d| d.binary == binary && d.lease.is_some()).map(|d| d.name)
}

/// The binaries the project ships, each an image of its own (`make image`) with its `--help` in docs/flags.md:
/// every described binary, then `csi-sidecars`.
pub static SHIPPED_BINARIES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| descriptions().map(|description| description.binary).chain(["csi-sidecars"]).collect());
