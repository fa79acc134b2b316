//! Fault injection for tests: make chosen RPCs fail, slow down, fail after doing their work, or answer wrong data.
//!
//! `--fault-config FILE` names a JSON object keyed by RPC method name (`CreateVolume`, `NodeStageVolume`, …,
//! or `*` for every method without an entry of its own):
//!
//! ```json
//! {
//!   "CreateVolume": {"code": "DeadlineExceeded", "probability": 1.0, "latency_ms": 0, "after_work": true, "times": 3},
//!   "Probe": {"code": "Unavailable", "message": "backend restarting"}
//! }
//! ```
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `code` | none | gRPC code, Go style (`Unavailable`, `DeadlineExceeded`, `ResourceExhausted`, …; case and `_` ignored) or a number. Without a code the rule only adds latency |
//! | `message` | "injected fault" | status message |
//! | `probability` | 1.0 | chance, per call, that the rule fires |
//! | `latency_ms` | 0 | delay before the answer when the rule fires |
//! | `after_work` | false | do the operation (and persist it) first, then answer with `code`: the caller sees an error although the work is done, as after a lost response |
//! | `times` | unlimited | how many times the rule fires at most |
//! | `answer` | none | instead of an error code: do the operation (and persist it), then alter the response. `empty_id`: CreateVolume's `volume_id`, CreateSnapshot's `snapshot_id` or CreateVolumeGroupSnapshot's `group_snapshot_id` is `""`; `zero_capacity`: CreateVolume's or ControllerExpandVolume's `capacity_bytes` is 0; `never_ready`: CreateSnapshot's and ListSnapshots' `ready_to_use` is false for as long as the rule fires. Refused with a `code`, and for a method (or `*`) the answer does not apply to |
//!
//! A method may also name a list of rules: alternatives drawn once per call, so their probabilities add up
//! (at most 1) and at most one fires. `[{"code": "Unavailable", "probability": 0.1}, {"latency_ms": 8000,
//! "probability": 0.02}]` fails 10 % of the calls and delays another 2 %; a rule whose `times` is used up
//! leaves its share of the draws to no fault.
//!
//! The file is read again whenever its modification time, size or inode changes, which also restarts
//! the `times` counters; a missing file means no faults. An invalid file is logged and injects nothing.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use csi_client::proto::{
    ControllerExpandVolumeResponse, CreateSnapshotResponse, CreateVolumeGroupSnapshotResponse, CreateVolumeResponse,
    ListSnapshotsResponse,
};
use serde::Deserialize;
use tonic::Code;

use crate::prng::Prng;

/// Every RPC the plugin serves; fault rules for other names are refused so typos do not go unnoticed.
pub const METHODS: &[&str] = &[
    // Identity
    "GetPluginInfo",
    "GetPluginCapabilities",
    "Probe",
    // Controller
    "CreateVolume",
    "DeleteVolume",
    "ControllerPublishVolume",
    "ControllerUnpublishVolume",
    "ValidateVolumeCapabilities",
    "ListVolumes",
    "ControllerListVolumeHealth",
    "ControllerGetVolumeHealth",
    "GetCapacity",
    "ControllerGetCapabilities",
    "CreateSnapshot",
    "DeleteSnapshot",
    "ListSnapshots",
    "GetSnapshot",
    "ControllerExpandVolume",
    "ControllerGetVolume",
    "ControllerModifyVolume",
    // GroupController
    "GroupControllerGetCapabilities",
    "CreateVolumeGroupSnapshot",
    "DeleteVolumeGroupSnapshot",
    "GetVolumeGroupSnapshot",
    // Node
    "NodeStageVolume",
    "NodeUnstageVolume",
    "NodePublishVolume",
    "NodeUnpublishVolume",
    "NodeGetVolumeStats",
    "NodeGetVolumeHealth",
    "NodeGetStorageHealth",
    "NodeExpandVolume",
    "NodeGetCapabilities",
    "NodeGetInfo",
];

/// The key of a rule that applies to every method without a rule of its own.
pub const ANY_METHOD: &str = "*";

#[derive(Debug, thiserror::Error)]
pub enum FaultConfigError {
    #[error("not a JSON object of rules: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unknown RPC method {0:?}")]
    UnknownMethod(String),
    #[error("{method}: unknown gRPC code {code}")]
    UnknownCode { method: String, code: String },
    #[error("{method}: probability {probability} is not between 0 and 1")]
    Probability { method: String, probability: f64 },
    #[error("{method}: the probabilities of the alternatives add up to {total}, more than 1")]
    AlternativesOverOne { method: String, total: f64 },
    #[error("{method}: unknown answer {answer} (empty_id, zero_capacity or never_ready)")]
    UnknownAnswer { method: String, answer: String },
    #[error("{method}: answer {answer} does not apply to {method}, only to {applies_to}")]
    AnswerNotForMethod { method: String, answer: &'static str, applies_to: String },
    #[error("{method}: a rule with an answer has no code (the answer replaces the error)")]
    AnswerWithCode { method: String },
}

/// A wrong answer to give after doing the work: the response is altered, as by a driver with a bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// CreateVolume's `volume_id`, CreateSnapshot's `snapshot_id`: empty.
    EmptyId,
    /// CreateVolume's and ControllerExpandVolume's `capacity_bytes`: 0.
    ZeroCapacity,
    /// CreateSnapshot's and ListSnapshots' `ready_to_use`: false.
    NeverReady,
}

impl Answer {
    const ALL: [Answer; 3] = [Answer::EmptyId, Answer::ZeroCapacity, Answer::NeverReady];

    pub fn name(self) -> &'static str {
        match self {
            Answer::EmptyId => "empty_id",
            Answer::ZeroCapacity => "zero_capacity",
            Answer::NeverReady => "never_ready",
        }
    }

    /// The methods whose responses this answer alters.
    pub fn methods(self) -> &'static [&'static str] {
        match self {
            Answer::EmptyId => &["CreateVolume", "CreateSnapshot", "CreateVolumeGroupSnapshot"],
            Answer::ZeroCapacity => &["CreateVolume", "ControllerExpandVolume"],
            Answer::NeverReady => &["CreateSnapshot", "ListSnapshots"],
        }
    }

    /// Alters `response` when it is of a type this answer applies to; says whether it did.
    pub fn apply(self, response: &mut dyn Any) -> bool {
        match self {
            Answer::EmptyId => {
                if let Some(r) = response.downcast_mut::<CreateVolumeResponse>() {
                    r.volume.iter_mut().for_each(|v| v.volume_id.clear());
                } else if let Some(r) = response.downcast_mut::<CreateSnapshotResponse>() {
                    r.snapshot.iter_mut().for_each(|s| s.snapshot_id.clear());
                } else if let Some(r) = response.downcast_mut::<CreateVolumeGroupSnapshotResponse>() {
                    r.group_snapshot.iter_mut().for_each(|g| g.group_snapshot_id.clear());
                } else {
                    return false;
                }
            }
            Answer::ZeroCapacity => {
                if let Some(r) = response.downcast_mut::<CreateVolumeResponse>() {
                    r.volume.iter_mut().for_each(|v| v.capacity_bytes = 0);
                } else if let Some(r) = response.downcast_mut::<ControllerExpandVolumeResponse>() {
                    r.capacity_bytes = 0;
                } else {
                    return false;
                }
            }
            Answer::NeverReady => {
                if let Some(r) = response.downcast_mut::<CreateSnapshotResponse>() {
                    r.snapshot.iter_mut().for_each(|s| s.ready_to_use = false);
                } else if let Some(r) = response.downcast_mut::<ListSnapshotsResponse>() {
                    r.entries.iter_mut().filter_map(|e| e.snapshot.as_mut()).for_each(|s| s.ready_to_use = false);
                } else {
                    return false;
                }
            }
        }
        true
    }
}

/// One parsed rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub code: Option<Code>,
    pub message: String,
    pub probability: f64,
    pub latency: Duration,
    pub after_work: bool,
    pub times: Option<u64>,
    pub answer: Option<Answer>,
}

/// What to do to one call, decided when the call arrives.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    pub code: Option<Code>,
    pub message: String,
    pub latency: Duration,
    pub after_work: bool,
    /// Do the work, then alter its response (instead of an error code).
    pub answer: Option<Answer>,
}

impl Injection {
    /// The error the caller sees, if the rule has a code.
    pub fn status(&self) -> Option<tonic::Status> {
        self.code.map(|code| tonic::Status::new(code, self.message.clone()))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    probability: Option<f64>,
    #[serde(default)]
    latency_ms: u64,
    #[serde(default)]
    after_work: bool,
    #[serde(default)]
    times: Option<u64>,
    #[serde(default)]
    answer: Option<String>,
}

/// Parses the text of a fault configuration file: each method's rules, alternatives in file order.
pub fn parse_config(text: &str) -> Result<BTreeMap<String, Vec<Rule>>, FaultConfigError> {
    // Each entry is read by its shape (a list or one rule) so that serde's messages name the bad field.
    let raw: BTreeMap<String, serde_json::Value> = serde_json::from_str(text)?;
    let mut rules = BTreeMap::new();
    for (method, entry) in raw {
        if method != ANY_METHOD && !METHODS.contains(&method.as_str()) {
            return Err(FaultConfigError::UnknownMethod(method));
        }
        let raws: Vec<RawRule> = match entry {
            list @ serde_json::Value::Array(_) => serde_json::from_value(list)?,
            one => vec![serde_json::from_value(one)?],
        };
        let parsed = raws.into_iter().map(|raw| parse_rule(&method, raw)).collect::<Result<Vec<_>, _>>()?;
        let total: f64 = parsed.iter().map(|rule| rule.probability).sum();
        // A little slack for decimal fractions that add up to 1 in the file but not in binary.
        if total > 1.0 + 1e-9 {
            return Err(FaultConfigError::AlternativesOverOne { method, total });
        }
        rules.insert(method, parsed);
    }
    Ok(rules)
}

fn parse_rule(method: &str, raw: RawRule) -> Result<Rule, FaultConfigError> {
    let method = method.to_string();
    let code = match &raw.code {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => {
            let parsed = match value {
                serde_json::Value::String(name) => parse_code(name),
                serde_json::Value::Number(n) => n.as_i64().and_then(code_from_number),
                _ => None,
            };
            let unknown = || FaultConfigError::UnknownCode { method: method.clone(), code: value.to_string() };
            // OK as a code means "no error": the rule then only adds latency.
            Some(parsed.ok_or_else(unknown)?).filter(|c| *c != Code::Ok)
        }
    };
    let probability = raw.probability.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&probability) {
        return Err(FaultConfigError::Probability { method, probability });
    }
    let answer = raw.answer.as_deref().map(|name| parse_answer(&method, name)).transpose()?;
    if answer.is_some() && code.is_some() {
        return Err(FaultConfigError::AnswerWithCode { method });
    }
    Ok(Rule {
        code,
        message: raw.message.unwrap_or_else(|| "injected fault".to_string()),
        probability,
        latency: Duration::from_millis(raw.latency_ms),
        after_work: raw.after_work,
        times: raw.times,
        answer,
    })
}

/// An answer by its name, refused for a method whose response it does not alter.
fn parse_answer(method: &str, name: &str) -> Result<Answer, FaultConfigError> {
    let answer = Answer::ALL
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| FaultConfigError::UnknownAnswer { method: method.to_string(), answer: name.to_string() })?;
    if !answer.methods().contains(&method) {
        return Err(FaultConfigError::AnswerNotForMethod {
            method: method.to_string(),
            answer: answer.name(),
            applies_to: answer.methods().join(" and "),
        });
    }
    Ok(answer)
}

/// A gRPC code by its Go name (`DeadlineExceeded`) or its proto name (`DEADLINE_EXCEEDED`); case and
/// underscores do not matter.
pub fn parse_code(name: &str) -> Option<Code> {
    let key: String = name.chars().filter(|c| *c != '_').flat_map(char::to_lowercase).collect();
    let code = match key.as_str() {
        "ok" => Code::Ok,
        "canceled" | "cancelled" => Code::Cancelled,
        "unknown" => Code::Unknown,
        "invalidargument" => Code::InvalidArgument,
        "deadlineexceeded" => Code::DeadlineExceeded,
        "notfound" => Code::NotFound,
        "alreadyexists" => Code::AlreadyExists,
        "permissiondenied" => Code::PermissionDenied,
        "resourceexhausted" => Code::ResourceExhausted,
        "failedprecondition" => Code::FailedPrecondition,
        "aborted" => Code::Aborted,
        "outofrange" => Code::OutOfRange,
        "unimplemented" => Code::Unimplemented,
        "internal" => Code::Internal,
        "unavailable" => Code::Unavailable,
        "dataloss" => Code::DataLoss,
        "unauthenticated" => Code::Unauthenticated,
        _ => return None,
    };
    Some(code)
}

fn code_from_number(n: i64) -> Option<Code> {
    let n = i32::try_from(n).ok().filter(|n| (0..=16).contains(n))?;
    Some(Code::from_i32(n))
}

/// Identifies one version of the configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    size: u64,
    modified_sec: i64,
    modified_nsec: i64,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            inode: meta.ino(),
            size: meta.size(),
            modified_sec: meta.mtime(),
            modified_nsec: meta.mtime_nsec(),
        })
    }
}

#[derive(Debug)]
struct Loaded {
    stamp: Option<FileStamp>,
    rules: BTreeMap<String, Vec<Rule>>,
    /// How often each rule fired, by method key and position among its alternatives.
    fired: HashMap<(String, usize), u64>,
    prng: Prng,
}

/// The plugin's fault injector. Without a configuration file it never injects anything.
#[derive(Debug)]
pub struct Faults {
    path: Option<PathBuf>,
    loaded: Mutex<Loaded>,
}

impl Faults {
    pub fn new(path: Option<PathBuf>) -> Self {
        Self::with_prng(path, Prng::from_entropy())
    }

    pub fn with_prng(path: Option<PathBuf>, prng: Prng) -> Self {
        let loaded = Loaded { stamp: None, rules: BTreeMap::new(), fired: HashMap::new(), prng };
        Self { path, loaded: Mutex::new(loaded) }
    }

    /// Decides, once per call, whether `method` gets a fault.
    pub fn draw(&self, method: &str) -> Option<Injection> {
        let path = self.path.as_ref()?;
        let mut loaded = self.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        loaded.reload_if_changed(path);
        let key = if loaded.rules.contains_key(method) { method } else { ANY_METHOD };
        let rules = loaded.rules.get(key)?.clone();
        // probability 1.0 must always fire and 0.0 never, whatever the generator returns: one draw, compared
        // with the running total of the alternatives' probabilities.
        let draw = match rules.as_slice() {
            [only] if only.probability >= 1.0 => 0.0,
            _ => loaded.prng.next_f64(),
        };
        let mut total = 0.0;
        let (index, rule) = rules.iter().enumerate().find(|(_, rule)| {
            total += rule.probability;
            draw < total
        })?;
        let fired = loaded.fired.entry((key.to_string(), index)).or_default();
        if rule.times.is_some_and(|times| *fired >= times) {
            return None;
        }
        *fired += 1;
        let rule = rule.clone();
        Some(Injection {
            code: rule.code,
            message: rule.message,
            latency: rule.latency,
            after_work: rule.after_work,
            answer: rule.answer,
        })
    }
}

impl Loaded {
    fn reload_if_changed(&mut self, path: &Path) {
        let stamp = FileStamp::of(path);
        if stamp == self.stamp {
            return;
        }
        self.stamp = stamp;
        self.fired.clear();
        self.rules = match stamp {
            None => BTreeMap::new(),
            Some(_) => match std::fs::read_to_string(path)
                .map_err(|e| e.to_string())
                .and_then(|text| parse_config(&text).map_err(|e| e.to_string()))
            {
                Ok(rules) => {
                    tracing::info!(path = %path.display(), methods = ?rules.keys().collect::<Vec<_>>(), "fault configuration loaded");
                    rules
                }
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "fault configuration ignored");
                    BTreeMap::new()
                }
            },
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rules() {
        let text = r#"{
            "CreateVolume": {"code": "DeadlineExceeded", "probability": 0.5, "latency_ms": 20, "after_work": true, "times": 3},
            "Probe": {"code": "UNAVAILABLE", "message": "restarting"},
            "ListVolumes": {"latency_ms": 5},
            "DeleteVolume": {"code": 14},
            "*": {"code": "internal"}
        }"#;
        let rules = parse_config(text).unwrap();
        assert_eq!(
            rules["CreateVolume"][0],
            Rule {
                code: Some(Code::DeadlineExceeded),
                message: "injected fault".into(),
                probability: 0.5,
                latency: Duration::from_millis(20),
                after_work: true,
                times: Some(3),
                answer: None,
            }
        );
        assert_eq!(rules["Probe"][0].code, Some(Code::Unavailable));
        assert_eq!(rules["Probe"][0].message, "restarting");
        assert_eq!(rules["Probe"][0].probability, 1.0);
        assert_eq!(rules["ListVolumes"][0].code, None);
        assert_eq!(rules["DeleteVolume"][0].code, Some(Code::Unavailable));
        assert_eq!(rules["*"][0].code, Some(Code::Internal));

        // (rule text, method, answer)
        let answers = [
            (r#"{"CreateVolume": {"answer": "empty_id", "times": 1}}"#, "CreateVolume", Answer::EmptyId),
            (r#"{"CreateSnapshot": {"answer": "empty_id"}}"#, "CreateSnapshot", Answer::EmptyId),
            (r#"{"CreateVolume": {"answer": "zero_capacity"}}"#, "CreateVolume", Answer::ZeroCapacity),
            (
                r#"{"ControllerExpandVolume": {"answer": "zero_capacity"}}"#,
                "ControllerExpandVolume",
                Answer::ZeroCapacity,
            ),
            (r#"{"CreateSnapshot": {"answer": "never_ready"}}"#, "CreateSnapshot", Answer::NeverReady),
            (r#"{"ListSnapshots": {"answer": "never_ready", "code": "OK"}}"#, "ListSnapshots", Answer::NeverReady),
        ];
        for (text, method, want) in answers {
            let rule = &parse_config(text).unwrap()[method][0];
            assert_eq!((rule.answer, rule.code), (Some(want), None), "{text}");
        }
    }

    #[test]
    fn answers_alter_the_response() {
        use csi_client::proto::{Snapshot, Volume, list_snapshots_response::Entry};
        let volume = || CreateVolumeResponse {
            volume: Some(Volume { volume_id: "vol-1".into(), capacity_bytes: 10, ..Default::default() }),
        };
        let snapshot = || Snapshot { snapshot_id: "snap-1".into(), ready_to_use: true, ..Default::default() };
        let created = || CreateSnapshotResponse { snapshot: Some(snapshot()) };
        let listed = || ListSnapshotsResponse {
            entries: vec![Entry { snapshot: Some(snapshot()) }, Entry { snapshot: Some(snapshot()) }],
            next_token: String::new(),
        };
        let expanded = || ControllerExpandVolumeResponse { capacity_bytes: 10, node_expansion_required: true };

        let mut v = volume();
        assert!(Answer::EmptyId.apply(&mut v));
        assert_eq!(v.volume.as_ref().map(|v| (v.volume_id.as_str(), v.capacity_bytes)), Some(("", 10)));
        let mut v = volume();
        assert!(Answer::ZeroCapacity.apply(&mut v));
        assert_eq!(v.volume.as_ref().map(|v| (v.volume_id.as_str(), v.capacity_bytes)), Some(("vol-1", 0)));
        let mut s = created();
        assert!(Answer::EmptyId.apply(&mut s));
        assert_eq!(s.snapshot.as_ref().map(|s| (s.snapshot_id.as_str(), s.ready_to_use)), Some(("", true)));
        let mut s = created();
        assert!(Answer::NeverReady.apply(&mut s));
        assert_eq!(s.snapshot.as_ref().map(|s| (s.snapshot_id.as_str(), s.ready_to_use)), Some(("snap-1", false)));
        let mut l = listed();
        assert!(Answer::NeverReady.apply(&mut l));
        assert!(l.entries.iter().all(|e| e.snapshot.as_ref().is_some_and(|s| !s.ready_to_use)));
        let mut e = expanded();
        assert!(Answer::ZeroCapacity.apply(&mut e));
        assert_eq!((e.capacity_bytes, e.node_expansion_required), (0, true));

        // A response the answer does not apply to is left alone.
        let mut s = created();
        assert!(!Answer::ZeroCapacity.apply(&mut s));
        assert_eq!(s, created());
        let mut e = expanded();
        assert!(!Answer::NeverReady.apply(&mut e));
        assert_eq!(e, expanded());
    }

    #[test]
    fn draws_carry_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faults.json");
        std::fs::write(&path, r#"{"CreateVolume": {"answer": "empty_id", "times": 1}}"#).unwrap();
        let faults = Faults::with_prng(Some(path), Prng::seeded(5));
        let injection = faults.draw("CreateVolume").unwrap();
        assert_eq!((injection.answer, injection.code), (Some(Answer::EmptyId), None));
        assert_eq!(faults.draw("CreateVolume"), None, "times reached");
    }

    #[test]
    fn refuses_bad_rules() {
        let cases: &[(&str, &str)] = &[
            (r#"{"CreateVolumes": {"code": "Unavailable"}}"#, "unknown RPC method"),
            (r#"{"CreateVolume": {"code": "Sometimes"}}"#, "unknown gRPC code"),
            (r#"{"CreateVolume": {"code": 17}}"#, "unknown gRPC code"),
            (r#"{"CreateVolume": {"code": true}}"#, "unknown gRPC code"),
            (r#"{"CreateVolume": {"probability": 1.5}}"#, "not between 0 and 1"),
            (r#"{"CreateVolume": {"probabilty": 0.5}}"#, "unknown field"),
            (r#"{"CreateVolume": {"latency_ms": -1}}"#, "invalid value"),
            (r#"["CreateVolume"]"#, "not a JSON object"),
            (r#"{"CreateVolume": [{"probability": 0.7}, {"probability": 0.4}]}"#, "add up to 1.1"),
            (r#"{"CreateVolume": [{"code": "Sometimes", "probability": 0.1}]}"#, "unknown gRPC code"),
            (r#"{"CreateVolume": [{"probabilty": 0.1}]}"#, "unknown field"),
            (r#"{"CreateVolume": {"answer": "garbage"}}"#, "CreateVolume: unknown answer garbage"),
            (r#"{"CreateVolume": {"answer": 3}}"#, "invalid type"),
            (
                r#"{"DeleteVolume": {"answer": "empty_id"}}"#,
                "DeleteVolume: answer empty_id does not apply to DeleteVolume, only to CreateVolume and CreateSnapshot and \
                 CreateVolumeGroupSnapshot",
            ),
            (r#"{"CreateSnapshot": {"answer": "zero_capacity"}}"#, "does not apply to CreateSnapshot"),
            (r#"{"CreateVolume": {"answer": "never_ready"}}"#, "does not apply to CreateVolume"),
            (r#"{"*": {"answer": "empty_id"}}"#, "does not apply to *"),
            (
                r#"{"CreateVolume": {"answer": "empty_id", "code": "Internal"}}"#,
                "CreateVolume: a rule with an answer has no code",
            ),
        ];
        for (text, want) in cases {
            let err = parse_config(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn parses_alternatives_in_order() {
        let text = r#"{"CreateVolume": [
            {"code": "DeadlineExceeded", "probability": 0.2, "after_work": true},
            {"code": "Unavailable", "probability": 0.1},
            {"latency_ms": 8000, "probability": 0.7}
        ]}"#;
        let rules = &parse_config(text).unwrap()["CreateVolume"];
        let shape: Vec<_> =
            rules.iter().map(|r| (r.code, r.probability, r.after_work, r.latency.as_millis())).collect();
        assert_eq!(
            shape,
            [
                (Some(Code::DeadlineExceeded), 0.2, true, 0),
                (Some(Code::Unavailable), 0.1, false, 0),
                (None, 0.7, false, 8000)
            ]
        );
    }

    #[test]
    fn alternatives_share_one_draw() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faults.json");
        let text = r#"{"CreateVolume": [
            {"code": "DeadlineExceeded", "probability": 0.2},
            {"code": "Unavailable", "probability": 0.1},
            {"code": "ResourceExhausted", "probability": 0.05, "times": 10}
        ]}"#;
        std::fs::write(&path, text).unwrap();
        let faults = Faults::with_prng(Some(path), Prng::seeded(7));
        let mut by_code: HashMap<Option<Code>, u32> = HashMap::new();
        for _ in 0..10_000 {
            *by_code.entry(faults.draw("CreateVolume").and_then(|i| i.code)).or_default() += 1;
        }
        let count = |code| by_code.get(&Some(code)).copied().unwrap_or(0);
        assert!((1800..2200).contains(&count(Code::DeadlineExceeded)), "{by_code:?}");
        assert!((850..1150).contains(&count(Code::Unavailable)), "{by_code:?}");
        assert_eq!(count(Code::ResourceExhausted), 10, "times bounds one alternative: {by_code:?}");
        assert_eq!(by_code.values().sum::<u32>(), 10_000);
    }

    #[test]
    fn alternatives_adding_up_to_one_always_fire() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faults.json");
        let text = r#"{"Probe": [{"code": "Internal", "probability": 0.3}, {"code": "Aborted", "probability": 0.7}]}"#;
        std::fs::write(&path, text).unwrap();
        let faults = Faults::with_prng(Some(path), Prng::seeded(11));
        assert!((0..1000).all(|_| faults.draw("Probe").is_some()));
    }

    #[test]
    fn parses_code_names() {
        let cases: &[(&str, Option<Code>)] = &[
            ("Unavailable", Some(Code::Unavailable)),
            ("DeadlineExceeded", Some(Code::DeadlineExceeded)),
            ("DEADLINE_EXCEEDED", Some(Code::DeadlineExceeded)),
            ("resource_exhausted", Some(Code::ResourceExhausted)),
            ("Canceled", Some(Code::Cancelled)),
            ("Cancelled", Some(Code::Cancelled)),
            ("FailedPrecondition", Some(Code::FailedPrecondition)),
            ("OK", Some(Code::Ok)),
            ("Timeout", None),
        ];
        for (name, want) in cases {
            assert_eq!(parse_code(name), *want, "parse_code({name:?})");
        }
    }

    #[test]
    fn follows_the_file_and_counts_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faults.json");
        let faults = Faults::with_prng(Some(path.clone()), Prng::seeded(3));
        assert_eq!(faults.draw("CreateVolume"), None, "missing file: no faults");

        std::fs::write(&path, r#"{"CreateVolume": {"code": "Unavailable", "times": 2}}"#).unwrap();
        assert_eq!(faults.draw("CreateVolume").and_then(|i| i.code), Some(Code::Unavailable));
        assert_eq!(faults.draw("DeleteVolume"), None, "other methods are untouched");
        assert_eq!(faults.draw("CreateVolume").and_then(|i| i.code), Some(Code::Unavailable));
        assert_eq!(faults.draw("CreateVolume"), None, "times reached");

        // A new version of the file (different size) restarts the counters.
        std::fs::write(&path, r#"{"*": {"code": "Aborted", "times": 1, "after_work": true}}"#).unwrap();
        let injection = faults.draw("DeleteVolume").unwrap();
        assert_eq!((injection.code, injection.after_work), (Some(Code::Aborted), true));
        assert_eq!(faults.draw("CreateVolume"), None, "the * rule has one counter");

        std::fs::write(&path, "not json").unwrap();
        assert_eq!(faults.draw("CreateVolume"), None, "an invalid file injects nothing");

        std::fs::write(&path, r#"{"Probe": {"code": "Internal", "probability": 0.0}}"#).unwrap();
        assert!((0..100).all(|_| faults.draw("Probe").is_none()), "probability 0 never fires");

        std::fs::remove_file(&path).unwrap();
        assert_eq!(faults.draw("Probe"), None);
    }

    #[test]
    fn probability_is_roughly_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faults.json");
        std::fs::write(&path, r#"{"Probe": {"code": "Internal", "probability": 0.25}}"#).unwrap();
        let faults = Faults::with_prng(Some(path), Prng::seeded(42));
        let fired = (0..4000).filter(|_| faults.draw("Probe").is_some()).count();
        assert!((800..1200).contains(&fired), "fired {fired} of 4000");
    }
}
