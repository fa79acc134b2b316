//! Mutable parameters (VolumeAttributesClass parameters): which keys this plugin accepts and which values
//! are valid.
//!
//! `--accepted-mutable-parameters` lists the accepted keys. Two keys have typed values the plugin checks:
//! - `iops`: a positive integer, e.g. `3000`;
//! - `throughput`: a positive number with a byte unit per second, e.g. `50MiB/s`, `1.5GiB/s`, `800B/s`.
//!
//! Any other listed key accepts any value, so tests can invent keys without a code change. An empty list
//! turns the feature off: MODIFY_VOLUME is not advertised, ControllerModifyVolume answers UNIMPLEMENTED and
//! a CreateVolume that carries mutable parameters is refused with INVALID_ARGUMENT.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use csi_client::quantity::{scale, split_number};

/// The keys accepted when the flag is not given.
pub const DEFAULT_ACCEPTED: &str = "iops,throughput";

/// Why a set of mutable parameters was refused. Nothing is applied when any key is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutableParameterError {
    #[error("mutable parameters are not supported by this plugin (--accepted-mutable-parameters is empty)")]
    Disabled,
    #[error("mutable parameter {key:?} is not supported (accepted: {accepted})")]
    UnknownKey { key: String, accepted: String },
    #[error("mutable parameter {key:?} has an invalid value {value:?}: {reason}")]
    InvalidValue { key: String, value: String, reason: &'static str },
}

/// The accepted keys, from `--accepted-mutable-parameters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutableParameterPolicy {
    accepted: BTreeSet<String>,
}

impl MutableParameterPolicy {
    /// Parses a comma-separated list of keys; blanks around and between commas are ignored.
    pub fn from_flag(list: &str) -> Self {
        let accepted = list.split(',').map(str::trim).filter(|k| !k.is_empty()).map(String::from).collect();
        Self { accepted }
    }

    /// Whether the plugin supports mutable parameters at all (advertises MODIFY_VOLUME).
    pub fn enabled(&self) -> bool {
        !self.accepted.is_empty()
    }

    /// Checks every key and value. Keys are checked in sorted order so the error names the same key
    /// every time.
    pub fn validate(&self, parameters: &HashMap<String, String>) -> Result<(), MutableParameterError> {
        if parameters.is_empty() {
            return Ok(());
        }
        if !self.enabled() {
            return Err(MutableParameterError::Disabled);
        }
        let sorted: BTreeMap<&String, &String> = parameters.iter().collect();
        for (key, value) in sorted {
            if !self.accepted.contains(key) {
                let accepted = self.accepted.iter().cloned().collect::<Vec<_>>().join(",");
                return Err(MutableParameterError::UnknownKey { key: key.clone(), accepted });
            }
            let checked = match key.as_str() {
                "iops" => parse_iops(value).map(drop),
                "throughput" => parse_throughput(value).map(drop),
                _ => Ok(()),
            };
            checked.map_err(|reason| MutableParameterError::InvalidValue {
                key: key.clone(),
                value: value.clone(),
                reason,
            })?;
        }
        Ok(())
    }
}

/// `iops`: a positive integer written with digits only.
pub fn parse_iops(value: &str) -> Result<u64, &'static str> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a positive integer");
    }
    match value.parse::<u64>() {
        Ok(0) => Err("must be greater than zero"),
        Ok(n) => Ok(n),
        Err(_) => Err("too large"),
    }
}

/// `throughput`: a positive number, a byte unit and `/s`; returns whole bytes per second (rounded down).
pub fn parse_throughput(value: &str) -> Result<i64, &'static str> {
    const EXPECTED: &str = "expected a positive number and a unit such as B/s, KiB/s, MiB/s or GiB/s";
    let per_second = value.strip_suffix("/s").ok_or(EXPECTED)?;
    let (number, unit) = split_number(per_second).ok_or(EXPECTED)?;
    let multiplier = throughput_unit(unit).ok_or(EXPECTED)?;
    if number.is_zero() {
        return Err("must be greater than zero");
    }
    scale(number, multiplier).ok_or("too large")
}

/// Byte units a throughput may use: `B`, decimal `kB`/`KB`/`MB`/`GB`/`TB`, binary `KiB`/`MiB`/`GiB`/`TiB`.
fn throughput_unit(unit: &str) -> Option<u128> {
    let value = match unit {
        "B" => 1,
        "kB" | "KB" => 1000,
        "MB" => 1000u128.pow(2),
        "GB" => 1000u128.pow(3),
        "TB" => 1000u128.pow(4),
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return None,
    };
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_the_accepted_list() {
        let cases: &[(&str, &[&str])] = &[
            ("iops,throughput", &["iops", "throughput"]),
            (" iops , tier ,", &["iops", "tier"]),
            ("", &[]),
            (" , ", &[]),
        ];
        for (flag, want) in cases {
            let policy = MutableParameterPolicy::from_flag(flag);
            let got: Vec<&str> = policy.accepted.iter().map(String::as_str).collect();
            assert_eq!(&got, want, "from_flag({flag:?})");
            assert_eq!(policy.enabled(), !want.is_empty());
        }
    }

    #[test]
    fn validates_keys_and_values() {
        let default = MutableParameterPolicy::from_flag(DEFAULT_ACCEPTED);
        let custom = MutableParameterPolicy::from_flag("iops,tier");
        let off = MutableParameterPolicy::from_flag("");
        type Case<'a> = (&'a MutableParameterPolicy, &'a [(&'a str, &'a str)], Result<(), &'a str>);
        let cases: &[Case] = &[
            (&default, &[], Ok(())),
            (&off, &[], Ok(())),
            (&default, &[("iops", "3000")], Ok(())),
            (&default, &[("iops", "1"), ("throughput", "50MiB/s")], Ok(())),
            (&default, &[("throughput", "1.5GiB/s")], Ok(())),
            (&default, &[("throughput", "800B/s")], Ok(())),
            (&default, &[("throughput", "10KB/s")], Ok(())),
            (&custom, &[("tier", "anything at all")], Ok(())),
            (&default, &[("iops", "0")], Err("iops")),
            (&default, &[("iops", "-5")], Err("iops")),
            (&default, &[("iops", "+5")], Err("iops")),
            (&default, &[("iops", "1.5")], Err("iops")),
            (&default, &[("iops", "")], Err("iops")),
            (&default, &[("iops", "99999999999999999999999")], Err("iops")),
            (&default, &[("throughput", "50MiB")], Err("throughput")),
            (&default, &[("throughput", "50/s")], Err("throughput")),
            (&default, &[("throughput", "0MiB/s")], Err("throughput")),
            (&default, &[("throughput", "0.0GiB/s")], Err("throughput")),
            (&default, &[("throughput", "fastMiB/s")], Err("throughput")),
            (&default, &[("throughput", "5Mi/s")], Err("throughput")),
            (&default, &[("XXX_FakeKey", "XXX_FakeValue")], Err("XXX_FakeKey")),
            // A bad key is reported even when another key is fine; the first bad key in sorted order wins.
            (&default, &[("iops", "100"), ("zzz", "1")], Err("zzz")),
            (&default, &[("iops", "0"), ("throughput", "bad")], Err("iops")),
            (&custom, &[("throughput", "50MiB/s")], Err("throughput")),
        ];
        for (policy, pairs, want) in cases {
            let got = policy.validate(&params(pairs));
            match (want, &got) {
                (Ok(()), Ok(())) => {}
                (Err(key), Err(MutableParameterError::UnknownKey { key: got_key, .. }))
                | (Err(key), Err(MutableParameterError::InvalidValue { key: got_key, .. })) => {
                    assert_eq!(key, got_key, "{pairs:?}: {got:?}")
                }
                _ => panic!("{pairs:?}: want {want:?}, got {got:?}"),
            }
        }
        assert_eq!(off.validate(&params(&[("iops", "1")])), Err(MutableParameterError::Disabled));
    }

    #[test]
    fn parses_throughput_values() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1B/s", Some(1)),
            ("50MiB/s", Some(50 << 20)),
            ("1.5GiB/s", Some(3 << 29)),
            ("2kB/s", Some(2000)),
            ("1TB/s", Some(1_000_000_000_000)),
            ("MiB/s", None),
            ("5 MiB/s", None),
            ("5MiB/sec", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_throughput(text).ok(), *want, "parse_throughput({text:?})");
        }
    }
}
