//! How the harness runs a sidecar: as its own binary (the default), or, with `E2E_SIDECAR_MODE=combined`, as
//! `csi-sidecars --sidecars=<that one>` with the same flags, so that every suite can check the combined process too.

use std::path::PathBuf;

use crate::processes::scenario::binary;
use crate::processes::shipped::combined_name;

/// Whether `E2E_SIDECAR_MODE=combined` is set.
pub fn combined() -> bool {
    std::env::var("E2E_SIDECAR_MODE").is_ok_and(|mode| mode == "combined")
}

/// The program and arguments that run the sidecar `binary_name` with `args` in the selected mode.
pub fn sidecar_command(binary_name: &str, args: Vec<String>) -> (PathBuf, Vec<String>) {
    match combined_name(binary_name).filter(|_| combined()) {
        Some(name) => {
            let mut combined_args = vec![format!("--sidecars={name}")];
            combined_args.extend(args);
            (binary("csi-sidecars"), combined_args)
        }
        None => (binary(binary_name), args),
    }
}
