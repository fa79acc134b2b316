//! The fault configuration the hostpath plugin reads (`--fault-config`, crates/hostpath-plugin/src/faults.rs),
//! and the count of faults it injected, read back from its logs.

use std::time::Duration;

use serde_json::{Value, json};

/// Shares of calls that get each fault (issue #16): drawn once per call, so at most one fires.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultMix {
    /// The work is done (and persisted), then the caller sees DEADLINE_EXCEEDED, as after a lost response.
    pub deadline_after_work: f64,
    pub unavailable: f64,
    pub resource_exhausted: f64,
    /// The call sleeps `hang_for`, past the sidecar's `--timeout`, then does the work.
    pub hang: f64,
    pub hang_for: Duration,
    /// Each wrong answer a method can give (the work done, then the answer altered: an empty id, capacity 0, a
    /// snapshot not ready; crates/hostpath-plugin/src/faults.rs, `answer`).
    pub wrong_answer: f64,
}

impl FaultMix {
    /// 20 % DEADLINE_EXCEEDED after the work, 10 % UNAVAILABLE, 5 % RESOURCE_EXHAUSTED, 2 % hanging, and 2 % each
    /// wrong answer of the method.
    pub fn standard(hang_for: Duration) -> FaultMix {
        FaultMix {
            deadline_after_work: 0.20,
            unavailable: 0.10,
            resource_exhausted: 0.05,
            hang: 0.02,
            hang_for,
            wrong_answer: 0.02,
        }
    }

    /// The alternatives of `method`, in the plugin's list form.
    fn alternatives(&self, method: &str) -> Value {
        let mut alternatives = json!([
            {"code": "DeadlineExceeded", "probability": self.deadline_after_work, "after_work": true,
             "message": "chaos: deadline exceeded after the work"},
            {"code": "Unavailable", "probability": self.unavailable, "message": "chaos: unavailable"},
            {"code": "ResourceExhausted", "probability": self.resource_exhausted, "message": "chaos: resource exhausted"},
            {"probability": self.hang, "latency_ms": self.hang_for.as_millis() as u64},
        ]);
        let list = alternatives.as_array_mut().expect("a list");
        for answer in wrong_answers(method) {
            list.push(json!({"answer": answer, "probability": self.wrong_answer}));
        }
        alternatives
    }
}

/// The wrong answers the sidecars must survive on `method` (ControllerExpandVolume's capacity 0 aside: nothing
/// judges csi-resizer's answer to it yet).
fn wrong_answers(method: &str) -> &'static [&'static str] {
    match method {
        "CreateVolume" => &["empty_id", "zero_capacity"],
        "CreateSnapshot" => &["empty_id", "never_ready"],
        _ => &[],
    }
}

/// The plugin's fault file: `mix` on each of `methods`, nothing on the others.
pub fn fault_config(methods: &[&str], mix: &FaultMix) -> Value {
    Value::Object(methods.iter().map(|method| (method.to_string(), mix.alternatives(method))).collect())
}

/// The plugin's methods each phase puts faults on.
pub const PROVISION_METHODS: &[&str] = &["CreateVolume", "DeleteVolume"];
pub const CHANGE_METHODS: &[&str] = &["ControllerExpandVolume", "ControllerModifyVolume"];
pub const SNAPSHOT_METHODS: &[&str] = &["CreateSnapshot", "DeleteSnapshot"];
/// GetVolumeGroupSnapshot is asked only for pre-provisioned group contents; faults on it cost nothing elsewhere.
pub const GROUP_METHODS: &[&str] =
    &["CreateVolumeGroupSnapshot", "DeleteVolumeGroupSnapshot", "GetVolumeGroupSnapshot"];

/// How many faults a plugin log shows: the plugin writes one warning per injection, starting "injected fault"
/// or "injected delay".
pub fn injected_faults(log: &str) -> u64 {
    log.lines().filter(|line| line.contains("injected fault") || line.contains("injected delay")).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_mix_is_issue_16s() {
        let config = fault_config(&["CreateVolume"], &FaultMix::standard(Duration::from_secs(8)));
        let rules = config["CreateVolume"].as_array().unwrap();
        // (code, probability, after the work, latency in ms, wrong answer) of each rule.
        type Rule<'a> = (Option<&'a str>, f64, bool, u64, Option<&'a str>);
        let shape: Vec<Rule> = rules
            .iter()
            .map(|r| {
                (
                    r["code"].as_str(),
                    r["probability"].as_f64().unwrap(),
                    r["after_work"].as_bool().unwrap_or(false),
                    r["latency_ms"].as_u64().unwrap_or(0),
                    r["answer"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (Some("DeadlineExceeded"), 0.20, true, 0, None),
                (Some("Unavailable"), 0.10, false, 0, None),
                (Some("ResourceExhausted"), 0.05, false, 0, None),
                (None, 0.02, false, 8000, None),
                (None, 0.02, false, 0, Some("empty_id")),
                (None, 0.02, false, 0, Some("zero_capacity")),
            ]
        );
        let total: f64 = shape.iter().map(|r| r.1).sum();
        assert!(total <= 1.0, "the plugin refuses alternatives over 1: {total}");
    }

    #[test]
    fn wrong_answers_go_only_where_they_apply() {
        let config = fault_config(&["CreateSnapshot", "DeleteVolume"], &FaultMix::standard(Duration::ZERO));
        let answers = |method: &str| -> Vec<String> {
            config[method].as_array().unwrap().iter().filter_map(|r| r["answer"].as_str().map(String::from)).collect()
        };
        assert_eq!(answers("CreateSnapshot"), ["empty_id", "never_ready"]);
        assert!(answers("DeleteVolume").is_empty());
    }

    #[test]
    fn config_names_only_the_given_methods() {
        let config = fault_config(PROVISION_METHODS, &FaultMix::standard(Duration::from_secs(1)));
        let keys: Vec<&String> = config.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["CreateVolume", "DeleteVolume"]);
        assert_eq!(fault_config(&[], &FaultMix::standard(Duration::ZERO)), json!({}));
    }

    #[test]
    fn counts_injection_lines() {
        let cases: &[(&str, u64)] = &[
            ("", 0),
            ("INFO method=\"CreateVolume\" ok\n", 0),
            ("WARN method=\"CreateVolume\" code=Unavailable injected fault instead of the work\n", 1),
            ("WARN injected fault after the work\nWARN injected delay before the work\nINFO ok\n", 2),
            ("WARN injected delay after the work\nWARN failed code=DeadlineExceeded\n", 1),
        ];
        for (log, want) in cases {
            assert_eq!(injected_faults(log), *want, "{log:?}");
        }
    }
}
