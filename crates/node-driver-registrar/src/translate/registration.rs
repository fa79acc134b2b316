//! The kubelet's plugin registration, as the registrar takes part in it: the socket it serves, what it answers
//! GetInfo, and what the kubelet's verdict means.

use std::path::{Path, PathBuf};

use crate::proto::{PluginInfo, RegistrationStatus};

/// The plugin type of a CSI driver in the kubelet's plugin registration.
pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";
/// The CSI plugin API versions the registrar offers the kubelet, as upstream.
pub const SUPPORTED_VERSIONS: [&str; 1] = ["1.0.0"];

/// `<plugin-registration-path>/<driver>-reg.sock`, where the kubelet's plugin watcher finds the registrar.
pub fn socket_path(registration_dir: &str, driver: &str) -> PathBuf {
    Path::new(registration_dir).join(format!("{driver}-reg.sock"))
}

/// GetInfo's answer: a CSI plugin named after the driver, reached at its socket on the host.
pub fn plugin_info(driver: &str, kubelet_registration_path: &str) -> PluginInfo {
    PluginInfo {
        r#type: CSI_PLUGIN_TYPE.to_string(),
        name: driver.to_string(),
        endpoint: kubelet_registration_path.to_string(),
        supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
    }
}

/// What the process does after the kubelet's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Registered: keep serving (the kubelet asks again after its own restart).
    Registered,
    /// Refused: exit 1 so that the container restarts and registers again, as upstream does.
    Refused { error: String },
}

pub fn verdict(status: &RegistrationStatus) -> Verdict {
    if status.plugin_registered { Verdict::Registered } else { Verdict::Refused { error: status.error.clone() } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_named_after_the_driver() {
        let table = [
            ("/registration", "hostpath.csi.k8s.io", "/registration/hostpath.csi.k8s.io-reg.sock"),
            (
                "/var/lib/kubelet/plugins_registry/",
                "ebs.csi.aws.com",
                "/var/lib/kubelet/plugins_registry/ebs.csi.aws.com-reg.sock",
            ),
            ("relative", "d", "relative/d-reg.sock"),
        ];
        for (dir, driver, want) in table {
            assert_eq!(socket_path(dir, driver), PathBuf::from(want), "{dir} {driver}");
        }
    }

    #[test]
    fn get_info_names_the_driver_and_its_host_socket() {
        let info = plugin_info("hostpath.csi.k8s.io", "/var/lib/kubelet/plugins/csi-hostpath/csi.sock");
        assert_eq!(info.r#type, "CSIPlugin");
        assert_eq!(info.name, "hostpath.csi.k8s.io");
        assert_eq!(info.endpoint, "/var/lib/kubelet/plugins/csi-hostpath/csi.sock");
        assert_eq!(info.supported_versions, ["1.0.0"]);
    }

    #[test]
    fn a_refusal_ends_the_process() {
        let table = [
            (RegistrationStatus { plugin_registered: true, error: String::new() }, Verdict::Registered),
            // An error text without the flag is still a success: the flag decides, as upstream.
            (RegistrationStatus { plugin_registered: true, error: "ignored".into() }, Verdict::Registered),
            (
                RegistrationStatus { plugin_registered: false, error: "version 2.0.0 not supported".into() },
                Verdict::Refused { error: "version 2.0.0 not supported".into() },
            ),
            (
                RegistrationStatus { plugin_registered: false, error: String::new() },
                Verdict::Refused { error: String::new() },
            ),
        ];
        for (status, want) in table {
            assert_eq!(verdict(&status), want, "{status:?}");
        }
    }
}
