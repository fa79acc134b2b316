//! `make conformance`: Kubernetes' own storage e2e tests (the "External Storage" suites of `e2e.test`, driven by
//! the test-driver definition in e2e/conformance/) against hostpath-plugin behind our sidecars, deployed on the node
//! by charts/csi-sidecars with every sidecar on (the attacher too: the CSIDriver says `attachRequired: true`), and
//! the same run with upstream's sidecars as the baseline ([`Images::Upstream`]).
//!
//! The Ginkgo CLI runs the selected specs in parallel processes (`[Serial]` ones alone, at the end); each finished
//! spec prints one progress line, and the last line counts them: `N passed, N failed, N skipped`. The reports
//! (Ginkgo's JUnit and JSON, the whole log) go to `target/conformance/<side>/`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::charts::tool;
use crate::control_plane::cluster::{Cluster, repo_root};
use crate::node::driver::{Images, NodeDriver};

/// Specs left out of every run, each with the reason (e2e/README.md lists them too).
pub const SKIPS: &[(&str, &str)] = &[
    ("Feature:Windows", "Windows nodes only"),
    (
        "any volume data source",
        "needs the hello-populator and volume-data-source-validator images, which neither the module proxy nor \
         Debian serves",
    ),
    ("\\[Disruptive\\]", "restarts the kubelet over SSH; the node is this machine, with no SSH"),
    ("volume-lifecycle-performance|pvc-deletion-performance", "performance measurements, not behaviour"),
    (
        "should not mount / map unused volumes in a pod",
        "reads the node's mounts with nsenter into PID 1's mount namespace, which this machine refuses even to root \
         (PID 1 is the VM's agent)",
    ),
];

/// One spec of each suite the driver takes part in (the suite, a pattern of its spec): `make test`'s share
/// (node_conformance), a few minutes.
pub const QUICK: &[(&str, &str)] = &[
    ("provisioning", "\\(default fs\\)\\] provisioning should provision storage with pvc data source"),
    ("volumes", "\\(default fs\\)\\] volumes should store data"),
    (
        "volumeMode",
        "Dynamic PV \\(block volmode\\)\\] volumeMode should fail to use a volume in a pod with mismatched mode",
    ),
    ("subPath", "Dynamic PV \\(default fs\\)\\] subPath should support existing directory"),
    (
        "multiVolume",
        "Dynamic PV \\(filesystem volmode\\)\\] multiVolume \\[Slow\\] should access to two volumes with the same volume mode and retain data across pod recreation on the same node",
    ),
    ("snapshottable", "Dynamic Snapshot \\(delete policy\\)\\] snapshottable.*check deletion \\(persistent\\)"),
    (
        "volume-expand",
        "\\(default fs\\)\\(allowExpansion\\)\\] volume-expand should resize volume when PVC is edited while pod is using it",
    ),
    ("ephemeral", "\\(default fs\\) \\(late-binding\\)\\] ephemeral should create read/write inline ephemeral volume"),
    ("topology", "topology should provision a volume and schedule a pod with AllowedTopologies"),
    ("capacity", "capacity provides storage capacity information"),
    ("volume-modify", "Dynamic PV \\(default fs\\)\\] volume-modify .*should modify volume with no VAC"),
    (
        "fsgroupchangepolicy",
        "Dynamic PV \\(default fs\\)\\] fsgroupchangepolicy \\(Always\\)\\[LinuxOnly\\], pod created with an initial fsgroup, new pod fsgroup applied to volume contents",
    ),
    ("read-write-once-pod", "Dynamic PV \\(default fs\\)\\] read-write-once-pod should block a second pod"),
    (
        "volumegroupsnapshottable",
        "Testpattern:  \\(delete policy\\)\\] volumegroupsnapshottable .*verify data consistency after restore",
    ),
];

/// The node's limit of the driver's volumes (NodeGetInfo, the CSINode's allocatable count): the volumeLimits suite
/// fills it with one pod's claims and expects the next pod to stay unscheduled; parallel specs never come near it.
pub const VOLUME_LIMIT: u32 = 20;

/// Which specs a run takes.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Ginkgo's `--focus` (a regular expression over the spec's full text).
    pub focus: String,
    /// Ginkgo's `--skip`.
    pub skip: String,
}

impl Selection {
    /// Every External Storage spec of the driver but [`SKIPS`].
    pub fn full() -> Selection {
        Selection {
            focus: "External.Storage".into(),
            skip: SKIPS.iter().map(|(p, _)| *p).collect::<Vec<_>>().join("|"),
        }
    }

    /// [`QUICK`], minus [`SKIPS`].
    pub fn quick() -> Selection {
        Selection {
            focus: format!("External.Storage.*({})", QUICK.iter().map(|(_, p)| *p).collect::<Vec<_>>().join("|")),
            ..Selection::full()
        }
    }
}

/// How one spec ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    Passed,
    Failed,
    Skipped,
}

/// A finished spec: its full text (without Ginkgo's `[It]`), its state, its seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub name: String,
    pub state: State,
    pub seconds: f64,
}

/// Reads Ginkgo's verbose output line by line and tells each finished spec. A spec's end is a status line (`• [36.8
/// seconds]`, `S [SKIPPED] [0.1 seconds]`, `• [FAILED] [...]`, `• [PANICKED]`, `• [TIMEDOUT]`, ...). Its name is the
/// line right after, when that line names a spec (skips and failures, and every spec when processes run in
/// parallel); otherwise the spec whose header was last printed (a pass of a spec run alone prints its header first).
#[derive(Debug)]
pub struct Progress {
    header: Option<String>,
    pending: Option<(State, f64)>,
    /// How the text of every spec the run takes starts.
    prefix: &'static str,
}

/// The prefix every spec of an external driver starts with.
const SPEC_PREFIX: &str = "External Storage [";

impl Default for Progress {
    fn default() -> Progress {
        Progress::with_prefix(SPEC_PREFIX)
    }
}

impl Progress {
    /// A reader of a run whose specs' texts all start with `prefix`.
    pub fn with_prefix(prefix: &'static str) -> Progress {
        Progress { header: None, pending: None, prefix }
    }

    /// Feeds one line; returns the spec it finished, if any.
    pub fn line(&mut self, line: &str) -> Option<Finished> {
        let line = line.trim_end();
        let is_name = line.starts_with(self.prefix);
        if let Some((state, seconds)) = self.pending.take() {
            let name = if is_name { Some(line.to_string()) } else { self.header.take() };
            if is_name {
                self.header = None;
            }
            return name.map(|name| Finished { name: without_node_type(&name), state, seconds });
        }
        if let Some(status) = status(line) {
            self.pending = Some(status);
        } else if is_name {
            self.header = Some(line.to_string());
        }
        None
    }
}

/// A spec's text without the Ginkgo node a report names (`[It]`, `[BeforeEach]`, ...).
fn without_node_type(name: &str) -> String {
    let mut name = name.to_string();
    for node in ["It", "BeforeEach", "JustBeforeEach", "AfterEach", "JustAfterEach", "DeferCleanup (Each)"] {
        name = name.replace(&format!(" [{node}] "), " ");
    }
    name
}

/// A Ginkgo status line's state and seconds.
fn status(line: &str) -> Option<(State, f64)> {
    let rest = line.strip_prefix("• ").or_else(|| line.strip_prefix("S "))?;
    let (state, rest) = match rest.strip_prefix('[')?.split_once(']')? {
        (word, rest) if word.ends_with("seconds") => (State::Passed, format!("[{word}]{rest}")),
        ("SKIPPED", rest) => (State::Skipped, rest.trim().to_string()),
        ("FAILED" | "PANICKED" | "TIMEDOUT" | "INTERRUPTED" | "ABORTED", rest) => {
            (State::Failed, rest.trim().to_string())
        }
        _ => return None,
    };
    let seconds = rest.strip_prefix('[')?.strip_suffix(" seconds]")?.parse().ok()?;
    Some((state, seconds))
}

/// The suite a spec belongs to: the first word after its test pattern and the tags that may follow it
/// (`... [Testpattern: X] [Slow] multiVolume [Slow] should ...`).
pub fn suite_of(name: &str) -> String {
    let after = name.split_once("[Testpattern: ").and_then(|(_, rest)| rest.split_once("] ")).map(|(_, rest)| rest);
    let mut rest = after.unwrap_or(name);
    while let Some(tagged) = rest.strip_prefix('[') {
        rest = tagged.split_once("] ").map(|(_, r)| r).unwrap_or_default();
    }
    rest.split([' ', '[']).next().unwrap_or_default().to_string()
}

/// The specs of one run, by name.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub specs: BTreeMap<String, Finished>,
}

impl Report {
    pub fn count(&self, state: State) -> usize {
        self.specs.values().filter(|s| s.state == state).count()
    }

    /// `N passed, N failed, N skipped`.
    pub fn last_line(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.count(State::Passed),
            self.count(State::Failed),
            self.count(State::Skipped)
        )
    }

    /// Passed, failed, skipped per suite.
    pub fn per_suite(&self) -> BTreeMap<String, [usize; 3]> {
        let mut suites: BTreeMap<String, [usize; 3]> = BTreeMap::new();
        for spec in self.specs.values() {
            suites.entry(suite_of(&spec.name)).or_default()[spec.state as usize] += 1;
        }
        suites
    }

    /// One line per spec: state, seconds, name (tab-separated), as [`Report::from_tsv`] reads it.
    pub fn tsv(&self) -> String {
        self.specs.values().map(|s| format!("{:?}\t{:.1}\t{}\n", s.state, s.seconds, s.name)).collect()
    }

    /// A report written by [`Report::tsv`].
    pub fn from_tsv(text: &str) -> Report {
        let mut report = Report::default();
        for line in text.lines() {
            let mut fields = line.splitn(3, '\t');
            let (Some(state), Some(seconds), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
                continue;
            };
            let state = match state {
                "Passed" => State::Passed,
                "Failed" => State::Failed,
                "Skipped" => State::Skipped,
                _ => continue,
            };
            let finished = Finished { name: name.to_string(), state, seconds: seconds.parse().unwrap_or(0.0) };
            report.specs.insert(name.to_string(), finished);
        }
        report
    }

    /// A Markdown table of [`Report::per_suite`] and, below it, every failed spec.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| suite | passed | failed | skipped |\n|---|---:|---:|---:|\n");
        for (suite, [p, f, s]) in self.per_suite() {
            out.push_str(&format!("| {suite} | {p} | {f} | {s} |\n"));
        }
        out.push_str(&format!("\n{}\n", self.last_line()));
        for spec in self.specs.values().filter(|s| s.state == State::Failed) {
            out.push_str(&format!("\n- failed: {}", spec.name));
        }
        out
    }
}

/// The specs that passed on one side and not on the other, as a Markdown table (driver names made alike).
pub fn compare(ours: &Report, upstream: &Report) -> String {
    let rows: String = differences(ours, upstream)
        .iter()
        .map(|d| format!("| {} | {} | {} |\n", d.name, label(d.ours.as_ref()), label(d.upstream.as_ref())))
        .collect();
    if rows.is_empty() {
        return "Every spec that passed with one side passed with the other.\n".into();
    }
    format!("| spec | ours | upstream |\n|---|---|---|\n{rows}")
}

/// A spec that passed on one side only: its text with the driver made alike, and its state on each side.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub name: String,
    pub ours: Option<State>,
    pub upstream: Option<State>,
}

/// The specs that passed on one side and not on the other, by name.
pub fn differences(ours: &Report, upstream: &Report) -> Vec<Difference> {
    let by_text = |report: &Report| -> BTreeMap<String, State> {
        report.specs.values().map(|s| (without_driver(&s.name), s.state)).collect()
    };
    let (ours, upstream) = (by_text(ours), by_text(upstream));
    let mut names: Vec<&String> = ours.keys().chain(upstream.keys()).collect();
    names.sort();
    names.dedup();
    let passed = |state: Option<&State>| state == Some(&State::Passed);
    names
        .into_iter()
        .filter(|name| passed(ours.get(*name)) != passed(upstream.get(*name)))
        .map(|name| Difference {
            name: name.clone(),
            ours: ours.get(name).copied(),
            upstream: upstream.get(name).copied(),
        })
        .collect()
}

fn label(state: Option<&State>) -> &'static str {
    match state {
        Some(State::Passed) => "passed",
        Some(State::Failed) => "failed",
        Some(State::Skipped) => "skipped",
        None => "not run",
    }
}

/// A spec's text with `[Driver: <name>]` made alike.
fn without_driver(name: &str) -> String {
    match name.split_once("[Driver: ").and_then(|(head, rest)| Some((head, rest.split_once(']')?.1))) {
        Some((head, tail)) => format!("{head}[Driver: *]{tail}"),
        None => name.to_string(),
    }
}

/// The test-driver definition for `driver`, written into `dir` with its VolumeAttributesClass file; returns the
/// definition's path.
pub fn write_definition(driver: &str, dir: &Path) -> PathBuf {
    let source = repo_root().join("e2e/conformance");
    std::fs::create_dir_all(dir).expect("creating the report directory");
    for file in ["test-driver.yaml", "volume-attributes-class.yaml"] {
        let text = std::fs::read_to_string(source.join(file)).expect("reading the definition");
        let text = text.replace("hostpath.csi.k8s.io", driver).replace(
            "FromFile: volume-attributes-class.yaml",
            &format!("FromFile: {}", dir.join("volume-attributes-class.yaml").display()),
        );
        std::fs::write(dir.join(file), text).expect("writing the definition");
    }
    dir.join("test-driver.yaml")
}

/// hostpath-plugin behind the chart's sidecars (`images`' side), with the chart's extras the definition claims:
/// fsGroupPolicy File, CSIStorageCapacity objects (csi-provisioner `--enable-capacity`, owned by the Deployment; for
/// Immediate classes too, which is what the suite's classes are), and a volume limit on the node
/// ([`VOLUME_LIMIT`]). The controller pods run as root (`driver.runAsRoot`, the chart's opt-out of "restricted"), as
/// upstream's csi-driver-host-path deployment does: the tests' pods write root-owned files into volumes, and the
/// controller half of hostpath-plugin deletes them. A root pod user alone would not do: the driver container's
/// default securityContext says runAsNonRoot, and the kubelet would refuse to start it. Its default also drops every
/// capability, and root without CAP_DAC_OVERRIDE cannot write in the state directory the chart's user owns, nor
/// delete what the tests' pods wrote: `capabilities: null` gives it the runtime's default set, as upstream's has.
pub async fn install(images: Images) -> NodeDriver {
    let extras = "csiDriver: {fsGroupPolicy: File, storageCapacity: true}\n\
                  provisioner: {extraArgs: [--enable-capacity, --capacity-ownerref-level=2, --capacity-for-immediate-binding]}\n\
                  driver: {runAsRoot: true, securityContext: {capabilities: null}}\n";
    let limit = format!("--max-volumes-per-node={VOLUME_LIMIT}");
    NodeDriver::install_charts_attaching_with("conf", extras, &[&limit], &images).await
}

/// Runs the selected specs against `driver` with `procs` parallel processes; reports go to `dir`. Prints a line per
/// finished spec and returns them all.
pub fn run(driver: &NodeDriver, selection: &Selection, procs: usize, dir: &Path) -> Report {
    let definition = write_definition(&driver.driver, dir);
    let kubeconfig = Cluster::shared().kubeconfig().to_path_buf();
    let test_args = [
        format!("--storage.testdriver={}", definition.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--provider=local".to_string(),
        format!("--report-dir={}", dir.display()),
    ];
    run_ginkgo(selection, procs, dir, &test_args, &[], Progress::default())
}

/// Runs e2e.test's specs of `selection` under the Ginkgo CLI with `procs` processes, `test_args` for e2e.test and
/// `envs` in its environment; `progress` reads its output. Writes e2e.log, junit.xml, summary.md and specs.tsv into
/// `dir`; prints a line per finished spec and returns them all.
pub fn run_ginkgo(
    selection: &Selection,
    procs: usize,
    dir: &Path,
    test_args: &[String],
    envs: &[(&str, String)],
    mut progress: Progress,
) -> Report {
    let e2e_test = tool("e2e.test");
    let total = selected(&e2e_test, selection, test_args, envs);
    let mut ginkgo = Command::new(tool("ginkgo"));
    ginkgo
        .arg("run")
        .args([format!("--procs={procs}"), "--no-color".into(), "-v".into(), "--timeout=6h".into()])
        .args([format!("--focus={}", selection.focus), format!("--skip={}", selection.skip)])
        .args([format!("--output-dir={}", dir.display()), "--junit-report=junit.xml".into()])
        .arg(&e2e_test)
        .arg("--")
        .args(test_args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = ginkgo.spawn().expect("starting ginkgo");
    let mut log = std::fs::File::create(dir.join("e2e.log")).expect("creating e2e.log");
    let mut report = Report::default();
    for line in BufReader::new(child.stdout.take().expect("piped stdout")).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(log, "{line}");
        if let Some(spec) = progress.line(&line) {
            let word = match spec.state {
                State::Passed => "passed ",
                State::Failed => "FAILED ",
                State::Skipped => "skipped",
            };
            println!("[{:>3}/{total}] {word} {:>6.1} s  {}", report.specs.len() + 1, spec.seconds, spec.name);
            report.specs.insert(spec.name.clone(), spec);
        }
    }
    let status = child.wait().expect("waiting for ginkgo");
    eprintln!("ginkgo: {status}; reports in {}", dir.display());
    std::fs::write(dir.join("summary.md"), report.markdown()).expect("writing summary.md");
    std::fs::write(dir.join("specs.tsv"), report.tsv()).expect("writing specs.tsv");
    report
}

/// How many specs `selection` takes (a dry run; 0 when it cannot tell).
fn selected(e2e_test: &Path, selection: &Selection, test_args: &[String], envs: &[(&str, String)]) -> usize {
    let output = Command::new(e2e_test)
        .args(["--ginkgo.dry-run", "--ginkgo.no-color"])
        .args([format!("--ginkgo.focus={}", selection.focus), format!("--ginkgo.skip={}", selection.skip)])
        .args(test_args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .output();
    let text = output.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    // "Ran 328 of 7907 Specs in 0.430 seconds"
    text.lines().find_map(|l| l.strip_prefix("Ran ")?.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASS_ALONE: &str = "------------------------------
External Storage [Driver: d] [Testpattern: Dynamic PV (default fs)] provisioning should provision storage with pvc data source
k8s.io/kubernetes@v1.36.3/test/e2e/storage/testsuites/provisioning.go:560
  STEP: Creating a kubernetes client @ 11/27/26 15:11:58.176
• [32.004 seconds]
------------------------------
SSSS
------------------------------
External Storage [Driver: d] [Testpattern: Dynamic PV (default fs)] volumes should store data
  STEP: x
S [SKIPPED] [0.084 seconds]
External Storage [Driver: d] [Testpattern: Dynamic PV (block volmode)] provisioning [It] should provision storage with any volume data source [Serial]
k8s.io/kubernetes@v1.36.3/test/e2e/storage/testsuites/provisioning.go:285
------------------------------
• [FAILED] [61.250 seconds]
External Storage [Driver: d] [Testpattern: Dynamic PV (default fs)] subPath [BeforeEach] should support existing directory
------------------------------
• [TIMEDOUT] [600.000 seconds]
External Storage [Driver: d] [Testpattern: Dynamic Snapshot (delete policy)] snapshottable[Feature:VolumeSnapshotDataSource] volume snapshot controller  [It] should check snapshot fields
";

    #[test]
    fn progress_names_each_finished_spec() {
        let mut progress = Progress::default();
        let finished: Vec<Finished> = PASS_ALONE.lines().filter_map(|l| progress.line(l)).collect();
        let rows: Vec<(State, &str, f64)> = finished.iter().map(|f| (f.state, f.name.as_str(), f.seconds)).collect();
        assert_eq!(
            rows,
            [
                (
                    State::Passed,
                    "External Storage [Driver: d] [Testpattern: Dynamic PV (default fs)] provisioning should provision \
                     storage with pvc data source",
                    32.004
                ),
                (
                    State::Skipped,
                    "External Storage [Driver: d] [Testpattern: Dynamic PV (block volmode)] provisioning should \
                     provision storage with any volume data source [Serial]",
                    0.084
                ),
                (
                    State::Failed,
                    "External Storage [Driver: d] [Testpattern: Dynamic PV (default fs)] subPath should support \
                     existing directory",
                    61.25
                ),
                (
                    State::Failed,
                    "External Storage [Driver: d] [Testpattern: Dynamic Snapshot (delete policy)] \
                     snapshottable[Feature:VolumeSnapshotDataSource] volume snapshot controller  should check \
                     snapshot fields",
                    600.0
                ),
            ]
        );
    }

    #[test]
    fn status_lines() {
        let cases: &[(&str, Option<(State, f64)>)] = &[
            ("• [36.880 seconds]", Some((State::Passed, 36.88))),
            ("S [SKIPPED] [0.099 seconds]", Some((State::Skipped, 0.099))),
            ("• [FAILED] [12.5 seconds]", Some((State::Failed, 12.5))),
            ("• [PANICKED] [1.0 seconds]", Some((State::Failed, 1.0))),
            ("[ReportBeforeSuite] PASSED [0.000 seconds]", None),
            ("SSSSSSSS", None),
            ("  [SKIPPED] Test for Block volumes is not implemented - skipping", None),
        ];
        for (line, want) in cases {
            assert_eq!(status(line), *want, "{line}");
        }
    }

    #[test]
    fn suites() {
        let cases = [
            (
                "External Storage [Driver: d] [Testpattern: Dynamic PV (default fs)] provisioning should x",
                "provisioning",
            ),
            (
                "External Storage [Driver: d] [Testpattern: Dynamic Snapshot (delete policy)] snapshottable[Feature:X] y",
                "snapshottable",
            ),
            ("External Storage [Driver: d] [Testpattern: Dynamic PV (default fs)] multiVolume [Slow] z", "multiVolume"),
            ("External Storage [Driver: d] [Testpattern: Dynamic PV (xfs)] [Slow] multiVolume [Slow] z", "multiVolume"),
            ("External Storage [Driver: d] [Testpattern: Dynamic PV (ntfs)] [Feature:Windows] volumes z", "volumes"),
        ];
        for (name, suite) in cases {
            assert_eq!(suite_of(name), suite, "{name}");
        }
    }

    #[test]
    fn compare_names_only_differences() {
        let spec = |name: &str, state| (name.to_string(), Finished { name: name.to_string(), state, seconds: 1.0 });
        let ours = Report {
            specs: [
                spec("External Storage [Driver: a.csi] [Testpattern: P] volumes x", State::Passed),
                spec("External Storage [Driver: a.csi] [Testpattern: P] volumes y", State::Failed),
            ]
            .into(),
        };
        let upstream = Report {
            specs: [
                spec("External Storage [Driver: b.csi] [Testpattern: P] volumes x", State::Passed),
                spec("External Storage [Driver: b.csi] [Testpattern: P] volumes y", State::Passed),
            ]
            .into(),
        };
        assert_eq!(
            compare(&ours, &upstream),
            "| spec | ours | upstream |\n|---|---|---|\n\
             | External Storage [Driver: *] [Testpattern: P] volumes y | failed | passed |\n"
        );
        assert_eq!(compare(&ours, &ours), "Every spec that passed with one side passed with the other.\n");
        let only_upstream = Difference {
            name: "External Storage [Driver: *] [Testpattern: P] volumes y".into(),
            ours: Some(State::Failed),
            upstream: Some(State::Passed),
        };
        assert_eq!(differences(&ours, &upstream), [only_upstream]);
        assert_eq!(Report::from_tsv(&ours.tsv()).specs, ours.specs);
        assert_eq!(ours.last_line(), "1 passed, 1 failed, 0 skipped");
        assert_eq!(ours.per_suite(), [("volumes".to_string(), [1, 1, 0])].into());
    }
}
