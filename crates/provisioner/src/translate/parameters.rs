//! StorageClass parameters: the fsType, the reserved `csi.storage.k8s.io/` keys kept from the driver, and the extra
//! create metadata (external-provisioner `prepareProvision` and `removePrefixedParameters`).

use std::collections::{BTreeMap, HashMap};

use super::names::{
    DEPRECATED_PARAM_FSTYPE, PARAM_FSTYPE, PARAM_PV_NAME, PARAM_PVC_NAME, PARAM_PVC_NAMESPACE,
    RESERVED_PARAMETER_PREFIX, RESERVED_PARAMETERS,
};
use super::secrets::SecretKind;

/// A StorageClass whose parameters cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParameterError {
    #[error("fstype specified in parameters with both \"fstype\" and \"{PARAM_FSTYPE}\" keys")]
    BothFsTypes,
    #[error(
        "failed to strip CSI Parameters of prefixed keys: found unknown parameter key \"{0}\" with reserved namespace {RESERVED_PARAMETER_PREFIX}"
    )]
    UnknownReservedKey(String),
}

/// The fsType for the volume: `csi.storage.k8s.io/fstype`, or the deprecated `fstype` (any case), or
/// `--default-fstype`, or empty. Giving both keys is refused.
pub fn fs_type(parameters: &BTreeMap<String, String>, default_fs_type: &str) -> Result<String, ParameterError> {
    let mut found = parameters.iter().filter(|(key, _)| is_fs_type_key(key)).map(|(_, value)| value);
    let value = found.next();
    if found.next().is_some() {
        return Err(ParameterError::BothFsTypes);
    }
    Ok(match value {
        Some(value) if !value.is_empty() => value.clone(),
        _ => default_fs_type.to_string(),
    })
}

fn is_fs_type_key(key: &str) -> bool {
    key == PARAM_FSTYPE || key.eq_ignore_ascii_case(DEPRECATED_PARAM_FSTYPE)
}

/// The warnings upstream logs for deprecated keys that are still honoured and still passed to the driver, one per key,
/// sorted by key.
pub fn deprecation_warnings(parameters: &BTreeMap<String, String>) -> Vec<String> {
    let mut warnings = Vec::new();
    for key in parameters.keys() {
        if key.eq_ignore_ascii_case(DEPRECATED_PARAM_FSTYPE) {
            // Upstream names the key in lower case whatever case the class used.
            warnings.push(deprecation_warning(DEPRECATED_PARAM_FSTYPE, PARAM_FSTYPE));
        }
        for kind in SecretKind::ALL {
            if let Some((name, namespace)) = kind.deprecated_keys() {
                if key == name {
                    warnings.push(deprecation_warning(name, kind.keys().0));
                } else if key == namespace {
                    warnings.push(deprecation_warning(namespace, kind.keys().1));
                }
            }
        }
    }
    warnings
}

fn deprecation_warning(deprecated: &str, replacement: &str) -> String {
    format!(
        "\"{deprecated}\" is deprecated and will be removed in a future release, please use \"{replacement}\" instead"
    )
}

/// The CreateVolume `parameters`: the class parameters without the reserved keys the provisioner understands. Any other
/// reserved key is refused. Deprecated keys without the prefix are passed through.
pub fn create_volume_parameters(
    parameters: &BTreeMap<String, String>,
) -> Result<HashMap<String, String>, ParameterError> {
    let mut out = HashMap::new();
    for (key, value) in parameters {
        if key.starts_with(RESERVED_PARAMETER_PREFIX) {
            if !RESERVED_PARAMETERS.contains(&key.as_str()) {
                return Err(ParameterError::UnknownReservedKey(key.clone()));
            }
        } else {
            out.insert(key.clone(), value.clone());
        }
    }
    Ok(out)
}

/// `--extra-create-metadata`: the claim's name and namespace and the PV name, added after stripping, so the driver gets
/// them.
pub fn add_extra_create_metadata(
    parameters: &mut HashMap<String, String>,
    claim_name: &str,
    claim_namespace: &str,
    pv_name: &str,
) {
    parameters.insert(PARAM_PVC_NAME.to_string(), claim_name.to_string());
    parameters.insert(PARAM_PVC_NAMESPACE.to_string(), claim_namespace.to_string());
    parameters.insert(PARAM_PV_NAME.to_string(), pv_name.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn fs_type_rules() {
        // (rule, parameters, --default-fstype, result)
        let table = [
            ("14: prefixed key", params(&[("csi.storage.k8s.io/fstype", "xfs")]), "", Ok("xfs")),
            ("13: deprecated key", params(&[("fstype", "ext3")]), "", Ok("ext3")),
            ("13: deprecated key in any case", params(&[("FsType", "btrfs")]), "ext4", Ok("btrfs")),
            (
                "14: both keys refused",
                params(&[("fstype", "ext3"), ("csi.storage.k8s.io/fstype", "xfs")]),
                "",
                Err(ParameterError::BothFsTypes),
            ),
            (
                "14: deprecated key twice in different case refused",
                params(&[("fstype", "ext3"), ("FSTYPE", "xfs")]),
                "",
                Err(ParameterError::BothFsTypes),
            ),
            ("14: neither → --default-fstype", params(&[("type", "fast")]), "ext4", Ok("ext4")),
            ("14: neither and no default → empty", params(&[]), "", Ok("")),
            ("14: empty value → --default-fstype", params(&[("csi.storage.k8s.io/fstype", "")]), "ext4", Ok("ext4")),
        ];
        for (rule, parameters, default, want) in table {
            assert_eq!(fs_type(&parameters, default), want.map(str::to_string), "{rule}");
        }
        assert_eq!(
            ParameterError::BothFsTypes.to_string(),
            "fstype specified in parameters with both \"fstype\" and \"csi.storage.k8s.io/fstype\" keys"
        );
    }

    #[test]
    fn reserved_keys_are_stripped() {
        let all_reserved: Vec<(&str, &str)> = RESERVED_PARAMETERS.iter().map(|k| (*k, "x")).collect();
        // (rule, parameters, result)
        let table = [
            (
                "11: every recognised reserved key is removed",
                params(&[all_reserved.as_slice(), &[("type", "fast")]].concat()),
                Ok(params(&[("type", "fast")])),
            ),
            (
                "13: deprecated keys reach the driver",
                params(&[
                    ("fstype", "ext4"),
                    ("csiProvisionerSecretName", "s"),
                    ("csiProvisionerSecretNamespace", "ns"),
                    ("csiNodePublishSecretName", "s"),
                ]),
                Ok(params(&[
                    ("fstype", "ext4"),
                    ("csiProvisionerSecretName", "s"),
                    ("csiProvisionerSecretNamespace", "ns"),
                    ("csiNodePublishSecretName", "s"),
                ])),
            ),
            (
                "12: unknown reserved key refused",
                params(&[("csi.storage.k8s.io/foo", "bar"), ("type", "fast")]),
                Err(ParameterError::UnknownReservedKey("csi.storage.k8s.io/foo".into())),
            ),
            (
                "12: extra-metadata keys are not accepted from the class",
                params(&[("csi.storage.k8s.io/pvc/name", "x")]),
                Err(ParameterError::UnknownReservedKey("csi.storage.k8s.io/pvc/name".into())),
            ),
            ("23: no parameters, empty map", params(&[]), Ok(params(&[]))),
        ];
        for (rule, parameters, want) in table {
            let got = create_volume_parameters(&parameters).map(|m| m.into_iter().collect::<BTreeMap<_, _>>());
            assert_eq!(got, want, "{rule}");
        }
        assert_eq!(
            ParameterError::UnknownReservedKey("csi.storage.k8s.io/foo".into()).to_string(),
            "failed to strip CSI Parameters of prefixed keys: found unknown parameter key \"csi.storage.k8s.io/foo\" with reserved namespace csi.storage.k8s.io/",
            "12: upstream wording"
        );
    }

    #[test]
    fn extra_create_metadata() {
        let mut parameters = create_volume_parameters(&params(&[("type", "fast")])).unwrap();
        add_extra_create_metadata(&mut parameters, "data", "apps", "pvc-123");
        let got: BTreeMap<_, _> = parameters.into_iter().collect();
        assert_eq!(
            got,
            params(&[
                ("type", "fast"),
                ("csi.storage.k8s.io/pvc/name", "data"),
                ("csi.storage.k8s.io/pvc/namespace", "apps"),
                ("csi.storage.k8s.io/pv/name", "pvc-123"),
            ]),
            "18: added after stripping"
        );
    }

    #[test]
    fn deprecated_keys_are_warned_about() {
        let got = deprecation_warnings(&params(&[
            ("FSType", "ext4"),
            ("csiNodeStageSecretNamespace", "ns"),
            ("csiControllerPublishSecretName", "s"),
            ("type", "fast"),
        ]));
        assert_eq!(
            got,
            vec![
                "\"fstype\" is deprecated and will be removed in a future release, please use \"csi.storage.k8s.io/fstype\" instead",
                "\"csiControllerPublishSecretName\" is deprecated and will be removed in a future release, please use \"csi.storage.k8s.io/controller-publish-secret-name\" instead",
                "\"csiNodeStageSecretNamespace\" is deprecated and will be removed in a future release, please use \"csi.storage.k8s.io/node-stage-secret-namespace\" instead",
            ],
            "13: one warning per deprecated key"
        );
    }
}
