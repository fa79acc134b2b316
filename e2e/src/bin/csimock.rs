//! `make csimock`: Kubernetes' CSI mock tests with our sidecars, then with upstream's (e2e/src/kubernetes_suites/csimock.rs).
//!
//!   csimock [--side=ours|upstream|both] [--quick] [--procs=N]
//!
//! Default: both sides, every spec where e2e.test is the mock driver, 4 processes. Reports go to
//! target/csimock/<side>/, the comparison to target/csimock/compare.md (with one side, against the other side's last
//! report, when there is one). The last line is ours: `N passed, N failed, N skipped`. Exits 1 when a spec failed
//! with ours, or passed with upstream's and not with ours.

use std::time::Instant;

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::kubernetes_suites::conformance::{self, Report, State};
use csi_sidecars_e2e::kubernetes_suites::csimock;
use csi_sidecars_e2e::node::driver::Images;
use csi_sidecars_e2e::node::pods::Node;

#[tokio::main]
async fn main() {
    let (mut sides, mut quick, mut procs) = (vec![Images::Ours, Images::Upstream], false, 4);
    for arg in std::env::args().skip(1) {
        match arg.trim_start_matches('-').split_once('=').unwrap_or((arg.trim_start_matches('-'), "")) {
            ("side", "ours") => sides = vec![Images::Ours],
            ("side", "upstream") => sides = vec![Images::Upstream],
            ("side", "both") => {}
            ("quick", "") => quick = true,
            ("procs", n) if n.parse::<usize>().is_ok_and(|n| n > 0) => procs = n.parse().unwrap(),
            _ => {
                eprintln!("usage: csimock [--side=ours|upstream|both] [--quick] [--procs=N]");
                std::process::exit(2);
            }
        }
    }
    let selection = csimock::selection(quick);
    Node::shared();
    let root = std::env::var_os("CARGO_TARGET_DIR").map(Into::into).unwrap_or_else(|| repo_root().join("target"));
    let mut reports: Vec<(Images, Report)> = Vec::new();
    // Upstream first, so that ours (the verdict) prints last.
    sides.sort_by_key(|side| *side == Images::Ours);
    for side in sides {
        let name = if side == Images::Ours { "ours" } else { "upstream" };
        let dir = root.join("csimock").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        let started = Instant::now();
        eprintln!(
            "[csimock] {name}: installing snapshot-controller, images from {}",
            csimock::sig_storage_registry(side)
        );
        let setup = csimock::install(side).await;
        eprintln!("[csimock] {name}: running ({procs} processes)");
        let report = csimock::run(side, &selection, procs, &dir);
        drop(setup);
        eprintln!(
            "[csimock] {name}: {} in {} s\n{}",
            report.last_line(),
            started.elapsed().as_secs(),
            csimock::per_file(&report)
        );
        reports.push((side, report));
    }
    let last = |name: &str| {
        let text = std::fs::read_to_string(root.join("csimock").join(name).join("specs.tsv")).ok()?;
        Some(Report::from_tsv(&text))
    };
    let this_run = |images| reports.iter().find(|(side, _)| *side == images).map(|(_, r)| r.clone());
    let ours = this_run(Images::Ours).or_else(|| last("ours"));
    let upstream = this_run(Images::Upstream).or_else(|| last("upstream"));
    let (ours, upstream) = (ours.as_ref(), upstream.as_ref());
    let mut failed = ours.is_some_and(|r| r.count(State::Failed) > 0);
    if let (Some(ours), Some(upstream)) = (ours, upstream) {
        let table = conformance::compare(ours, upstream);
        std::fs::write(root.join("csimock/compare.md"), &table).expect("writing compare.md");
        eprintln!("[csimock] ours against upstream's:\n{table}");
        failed |= conformance::differences(ours, upstream).iter().any(|d| d.upstream == Some(State::Passed));
    }
    if let Some((_, report)) = reports.last() {
        println!("{}", report.last_line());
    }
    std::process::exit(i32::from(failed));
}
