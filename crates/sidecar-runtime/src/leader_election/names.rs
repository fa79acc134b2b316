//! Lease names and identities, spelled exactly as the upstream sidecars spell
//! them, so that ours and theirs contend for the same Lease during a rolling
//! upgrade.

/// csi-lib-utils' rule for lock names and identities: every character outside
/// `[a-zA-Z0-9-]` becomes `-`, and a name ending in `-` gets an `X` appended
/// (an object name must not end in `-`).
pub fn sanitize_name(name: &str) -> String {
    let mut sanitized: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    if sanitized.ends_with('-') {
        sanitized.push('X');
    }
    sanitized
}

/// csi-provisioner: the driver name itself (`hostpath.csi.k8s.io` → `hostpath-csi-k8s-io`).
pub fn provisioner_lease_name(driver: &str) -> String {
    sanitize_name(driver)
}

/// csi-resizer: `external-resizer-<driver>`.
pub fn resizer_lease_name(driver: &str) -> String {
    sanitize_name(&format!("external-resizer-{driver}"))
}

/// csi-attacher: `external-attacher-leader-<driver>` (external-attacher cmd/csi-attacher/main.go).
pub fn attacher_lease_name(driver: &str) -> String {
    sanitize_name(&format!("external-attacher-leader-{driver}"))
}

/// csi-snapshotter: `external-snapshotter-leader-<driver>`.
pub fn snapshotter_lease_name(driver: &str) -> String {
    sanitize_name(&format!("external-snapshotter-leader-{driver}"))
}

/// csi-group-snapshotter (the group loop alone, beside a csi-snapshotter running the single-snapshot one):
/// `external-snapshotter-group-leader-<driver>`, so that it never contends with that csi-snapshotter.
pub fn group_snapshotter_lease_name(driver: &str) -> String {
    sanitize_name(&format!("external-snapshotter-group-leader-{driver}"))
}

/// snapshot-controller: one fixed name, whatever the drivers.
pub const SNAPSHOT_CONTROLLER_LEASE_NAME: &str = "snapshot-controller-leader";

/// The default identity: this host's name, sanitised like the lock name. In a
/// pod the hostname is the pod name, so every replica differs.
pub fn default_identity() -> String {
    let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
    if host.is_empty() { sanitize_name("unknown-host") } else { sanitize_name(&host) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitising() {
        let cases = [
            ("hostpath.csi.k8s.io", "hostpath-csi-k8s-io"),
            ("ebs.csi.aws.com", "ebs-csi-aws-com"),
            ("com.example/driver", "com-example-driver"),
            ("driver_with_underscores", "driver-with-underscores"),
            ("ends-with-dot.", "ends-with-dot-X"),
            ("ends-with-dash-", "ends-with-dash-X"),
            ("Mixed-Case-09", "Mixed-Case-09"),
            ("ünïcode", "-n-code"),
            ("node-1:8080", "node-1-8080"),
        ];
        for (input, expected) in cases {
            assert_eq!(sanitize_name(input), expected, "input {input:?}");
        }
    }

    type NameOf = fn(&str) -> String;

    #[test]
    fn the_group_snapshotter_has_a_lease_of_its_own() {
        let name = group_snapshotter_lease_name("hostpath.csi.k8s.io");
        assert_eq!(name, "external-snapshotter-group-leader-hostpath-csi-k8s-io");
        assert_ne!(name, snapshotter_lease_name("hostpath.csi.k8s.io"));
    }

    #[test]
    fn lease_names_per_sidecar() {
        let cases: [(NameOf, &str, &str); 9] = [
            (provisioner_lease_name, "hostpath.csi.k8s.io", "hostpath-csi-k8s-io"),
            (provisioner_lease_name, "example.com/csi", "example-com-csi"),
            (resizer_lease_name, "hostpath.csi.k8s.io", "external-resizer-hostpath-csi-k8s-io"),
            (resizer_lease_name, "odd.driver.", "external-resizer-odd-driver-X"),
            (snapshotter_lease_name, "hostpath.csi.k8s.io", "external-snapshotter-leader-hostpath-csi-k8s-io"),
            (snapshotter_lease_name, "example.com/csi", "external-snapshotter-leader-example-com-csi"),
            (snapshotter_lease_name, "odd_", "external-snapshotter-leader-odd-X"),
            (attacher_lease_name, "hostpath.csi.k8s.io", "external-attacher-leader-hostpath-csi-k8s-io"),
            (attacher_lease_name, "example.com/csi_x", "external-attacher-leader-example-com-csi-x"),
        ];
        for (name_of, driver, expected) in cases {
            assert_eq!(name_of(driver), expected, "driver {driver:?}");
        }
        assert_eq!(SNAPSHOT_CONTROLLER_LEASE_NAME, "snapshot-controller-leader");
    }

    #[test]
    fn identity_is_a_valid_name() {
        let identity = default_identity();
        assert!(!identity.is_empty());
        assert_eq!(sanitize_name(&identity), identity);
    }
}
