//! Flag values with upstream syntax: Go booleans, `--feature-gates` and
//! `--leader-election-labels`.

use std::collections::BTreeMap;

/// Why a flag value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("invalid boolean {0:?} (use true or false)")]
    Bool(String),
    #[error("missing bool value for feature gate {0:?} (write Name=true or Name=false)")]
    GateWithoutValue(String),
    #[error("invalid value {value:?} for feature gate {name:?}: use true or false")]
    GateValue { name: String, value: String },
    #[error("empty feature gate name in {0:?}")]
    EmptyGateName(String),
    #[error("unrecognized feature gate: {0}")]
    UnknownGate(String),
    #[error("invalid label {0:?}: labels are written key:value,key2:value2")]
    Label(String),
}

/// Go's `strconv.ParseBool`: what `--flag=<value>` accepts for a bool flag.
pub fn parse_go_bool(input: &str) -> Result<bool, ValueError> {
    match input {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(ValueError::Bool(input.to_string())),
    }
}

/// `--feature-gates=Name=true,Other=false`. Repeating the flag adds to the set,
/// and a later value for the same gate wins, as with component-base.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates(BTreeMap<String, bool>);

impl FeatureGates {
    pub fn parse(input: &str) -> Result<FeatureGates, ValueError> {
        let mut gates = BTreeMap::new();
        for entry in input.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((name, value)) = entry.split_once('=') else {
                return Err(ValueError::GateWithoutValue(entry.to_string()));
            };
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() {
                return Err(ValueError::EmptyGateName(input.to_string()));
            }
            let enabled = parse_go_bool(value)
                .map_err(|_| ValueError::GateValue { name: name.to_string(), value: value.to_string() })?;
            gates.insert(name.to_string(), enabled);
        }
        Ok(FeatureGates(gates))
    }

    /// Later occurrences of the flag override earlier ones gate by gate.
    pub fn merged<'a>(all: impl IntoIterator<Item = &'a FeatureGates>) -> FeatureGates {
        let mut merged = BTreeMap::new();
        for gates in all {
            merged.extend(gates.0.iter().map(|(name, enabled)| (name.clone(), *enabled)));
        }
        FeatureGates(merged)
    }

    /// The gate's value as set on the command line, else `default`.
    pub fn enabled(&self, name: &str, default: bool) -> bool {
        self.0.get(name).copied().unwrap_or(default)
    }

    /// The gate as set on the command line, or `None` when it was not given.
    /// Some sidecars decide differently when a gate is not set explicitly.
    pub fn explicit(&self, name: &str) -> Option<bool> {
        self.0.get(name).copied()
    }

    /// Refuses gates the sidecar does not know, as upstream does at startup. The Kubernetes-wide gates every
    /// upstream sidecar lists too ([`KUBERNETES_GATES`]) are accepted at any value; they change nothing here.
    pub fn check_known(&self, known: &[&str]) -> Result<(), ValueError> {
        let accepted = |name: &str| known.contains(&name) || KUBERNETES_GATES.contains(&name);
        match self.0.keys().find(|name| !accepted(name)) {
            Some(unknown) => Err(ValueError::UnknownGate(unknown.clone())),
            None => Ok(()),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().map(|(name, enabled)| (name.as_str(), *enabled))
    }

    /// The gates of `ga` (the sidecar's GA gates) given on the command line, with their values.
    pub fn ga_gates_set<'a>(&'a self, ga: &'a [&str]) -> impl Iterator<Item = (&'a str, bool)> {
        self.iter().filter(|(name, _)| ga.contains(name))
    }

    /// Warns about each GA gate given on the command line, in component-base's words (a GA gate still takes the
    /// value given, but it will be removed, and a manifest that sets it will then fail to start).
    pub fn warn_ga_gates_set(&self, ga: &[&str]) {
        for (name, value) in self.ga_gates_set(ga) {
            tracing::warn!(
                featureGate = name,
                value,
                "Warning: setting GA feature gate. It will be removed in a future release."
            );
        }
    }
}

/// The gates of Kubernetes' own libraries (component-base, apiserver, client-go) that every upstream sidecar's
/// `--feature-gates` lists beside its own, read from the `-h` of external-provisioner v6.4.0, external-resizer
/// v2.3.0, external-attacher v4.13.0 and external-snapshotter v8.7.0. A manifest may set any of them; none changes
/// what these sidecars do.
pub const KUBERNETES_GATES: &[&str] = &[
    "APIResponseCompression",
    "APIServerIdentity",
    "APIServerWebhookAuthenticationToken",
    "APIServingWithRoutine",
    "AllAlpha",
    "AllBeta",
    "AllowParsingUserUIDFromCertAuth",
    "AllowUnsafeMalformedObjectDeletion",
    "CBORServingAndStorage",
    "ComponentFlagz",
    "ComponentStatusz",
    "ConcurrentWatchObjectDecode",
    "ConsistentListFromCacheSkipTimeoutFallback",
    "ConstrainedImpersonation",
    "CoordinatedLeaderElection",
    "DeclarativeValidationBeta",
    "DetectCacheInconsistency",
    "EtcdRangeStream",
    "ExcludeAdmissionWebhookVirtualResources",
    "ListFromCacheSnapshot",
    "ManifestBasedAdmissionControlConfig",
    "NativeHistograms",
    "OpenAPIEnums",
    "RemoteRequestHeaderUID",
    "ShardedListAndWatch",
    "SizeBasedListCostEstimate",
    "StorageVersionAPI",
    "StorageVersionHash",
    "StructuredAuthenticationConfigurationEgressSelector",
    "StructuredAuthenticationConfigurationJWKSMetrics",
    "TokenRequestServiceAccountUIDValidation",
    "UnauthenticatedHTTP2DOSMitigation",
    "UnknownVersionInteroperabilityProxy",
    "WatchList",
    "WatchListCompression",
    "WebhookRoundTripLoadBalancing",
];

/// `--leader-election-labels=key:value,key2:value2`.
pub fn parse_labels(input: &str) -> Result<BTreeMap<String, String>, ValueError> {
    let mut labels = BTreeMap::new();
    for entry in input.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, value)) = entry.split_once(':') else {
            return Err(ValueError::Label(entry.to_string()));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || value.contains(':') {
            return Err(ValueError::Label(entry.to_string()));
        }
        labels.insert(key.to_string(), value.to_string());
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_booleans() {
        for input in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(parse_go_bool(input), Ok(true), "{input}");
        }
        for input in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(parse_go_bool(input), Ok(false), "{input}");
        }
        for input in ["", "yes", "on", "tRuE", "2"] {
            assert!(parse_go_bool(input).is_err(), "{input}");
        }
    }

    #[test]
    fn feature_gates_parse() {
        let cases: &[(&str, &[(&str, bool)])] = &[
            ("", &[]),
            ("ReleaseLeaderElectionOnExit=true", &[("ReleaseLeaderElectionOnExit", true)]),
            ("A=true,B=false", &[("A", true), ("B", false)]),
            (" A = true , B=False ,", &[("A", true), ("B", false)]),
            ("A=true,A=false", &[("A", false)]),
            ("A=1,B=0,C=T", &[("A", true), ("B", false), ("C", true)]),
        ];
        for (input, expected) in cases {
            let gates = FeatureGates::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            let got: Vec<(&str, bool)> = gates.iter().collect();
            assert_eq!(&got, expected, "input {input:?}");
        }
    }

    #[test]
    fn feature_gates_refuse_bad_syntax() {
        let cases: &[(&str, ValueError)] = &[
            ("A", ValueError::GateWithoutValue("A".into())),
            ("A=yes", ValueError::GateValue { name: "A".into(), value: "yes".into() }),
            ("A=", ValueError::GateValue { name: "A".into(), value: "".into() }),
            ("=true", ValueError::EmptyGateName("=true".into())),
        ];
        for (input, expected) in cases {
            assert_eq!(FeatureGates::parse(input).as_ref(), Err(expected), "input {input:?}");
        }
    }

    #[test]
    fn feature_gates_merge_lookup_and_check() {
        let first = FeatureGates::parse("A=true,B=true").unwrap();
        let second = FeatureGates::parse("B=false").unwrap();
        let gates = FeatureGates::merged([&first, &second]);
        assert!(gates.enabled("A", false));
        assert!(!gates.enabled("B", true));
        assert!(gates.enabled("C", true));
        assert!(!gates.enabled("C", false));
        assert_eq!(gates.explicit("B"), Some(false));
        assert_eq!(gates.explicit("C"), None);
        assert_eq!(gates.check_known(&["A", "B"]), Ok(()));
        assert_eq!(gates.check_known(&["A"]), Err(ValueError::UnknownGate("B".into())));
        // Kubernetes' own gates pass whatever the sidecar knows, at either value.
        let kubernetes =
            FeatureGates::parse("A=true,AllAlpha=true,WatchList=false,CBORServingAndStorage=true").unwrap();
        assert_eq!(kubernetes.check_known(&["A"]), Ok(()));
        // The GA gates given, to warn about: only those of the list, at either value.
        let given = FeatureGates::parse("A=true,B=false,C=true").unwrap();
        let set: Vec<(&str, bool)> = given.ga_gates_set(&["B", "C", "D"]).collect();
        assert_eq!(set, [("B", false), ("C", true)]);
    }

    #[test]
    fn labels_parse() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("k:v", &[("k", "v")]),
            ("k:v,k2:v2", &[("k", "v"), ("k2", "v2")]),
            ("app.kubernetes.io/name:csi, tier : storage", &[("app.kubernetes.io/name", "csi"), ("tier", "storage")]),
            ("k:", &[("k", "")]),
        ];
        for (input, expected) in cases {
            let labels = parse_labels(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            let got: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(&got, expected, "input {input:?}");
        }
    }

    #[test]
    fn labels_refuse_bad_syntax() {
        for input in ["k", "k=v", ":v", "k:v:w", "a:b,c"] {
            assert!(parse_labels(input).is_err(), "input {input:?}");
        }
    }
}
