use super::*;

fn argv(words: &[&str]) -> Vec<OsString> {
    std::iter::once("csi-sidecars").chain(words.iter().copied()).map(OsString::from).collect()
}

fn words(argv: &[OsString]) -> Vec<String> {
    argv.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

fn kind(name: &str) -> Kind {
    Kind::from_name(name).unwrap_or_else(|| panic!("no sidecar {name}"))
}

fn of(line: &CommandLine, kind: Kind) -> Vec<String> {
    line.sidecars.iter().find(|(k, _)| *k == kind).map(|(_, a)| words(&a[1..])).unwrap_or_default()
}

/// (case, command line, provisioner's flags, resizer's flags)
type SplitRow<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);

#[test]
fn each_flag_goes_to_the_sidecars_that_have_it() {
    let table: &[SplitRow] = &[
        (
            "a shared flag goes to both",
            &["--sidecars=provisioner,resizer", "--timeout=30s"],
            &["--timeout=30s"],
            &["--timeout=30s"],
        ),
        (
            "a prefixed flag overrides for one, after the shared value",
            &["--sidecars=provisioner,resizer", "--resizer.timeout=2m", "--timeout=30s"],
            &["--timeout=30s"],
            &["--timeout=30s", "--timeout=2m"],
        ),
        (
            "a flag only one sidecar has",
            &["--sidecars=provisioner,resizer", "--capacity-threads=4", "--workers=3"],
            &["--capacity-threads=4"],
            &["--workers=3"],
        ),
        (
            "Go forms, and a value in the next argument",
            &["-sidecars=resizer,provisioner", "-csi-address", "/csi/sock", "-v=5", "-leader-election"],
            &["--csi-address", "/csi/sock", "--v=5", "--leader-election"],
            &["--csi-address", "/csi/sock", "--v=5", "--leader-election"],
        ),
        (
            "a prefixed value in the next argument",
            &["--sidecars=provisioner,resizer", "--provisioner.worker-threads", "7"],
            &["--worker-threads", "7"],
            &[],
        ),
        (
            "feature gates per sidecar",
            &["--sidecars=provisioner,resizer", "--provisioner.feature-gates=Topology=true"],
            &["--feature-gates=Topology=true"],
            &[],
        ),
    ];
    for (case, line, provisioner, resizer) in table {
        let split = split(argv(line)).unwrap_or_else(|err| panic!("{case}: {err}"));
        assert_eq!(of(&split, kind("provisioner")), *provisioner, "{case}");
        assert_eq!(of(&split, kind("resizer")), *resizer, "{case}");
    }
}

#[test]
fn the_controller_and_node_pods_sets_split() {
    let controller = split(argv(&[
        "--sidecars=provisioner,attacher,livenessprobe",
        "--csi-address=/csi/csi.sock",
        "--timeout=30s",
        "--attacher.worker-threads=3",
        "--livenessprobe.probe-timeout=5s",
    ]))
    .unwrap();
    assert_eq!(words(&controller.process[1..]), ["--csi-address=/csi/csi.sock"]);
    assert_eq!(of(&controller, kind("provisioner")), ["--csi-address=/csi/csi.sock", "--timeout=30s"]);
    assert_eq!(
        of(&controller, kind("attacher")),
        ["--csi-address=/csi/csi.sock", "--timeout=30s", "--worker-threads=3"]
    );
    assert_eq!(of(&controller, kind("livenessprobe")), ["--csi-address=/csi/csi.sock", "--probe-timeout=5s"]);

    let path = "--kubelet-registration-path=/var/lib/kubelet/plugins/d/csi.sock";
    let node = split(argv(&[
        "--sidecars=registrar,livenessprobe",
        "--csi-address=/csi/csi.sock",
        path,
        "--http-endpoint=:9809",
    ]))
    .unwrap();
    assert_eq!(words(&node.process[1..]), ["--csi-address=/csi/csi.sock", "--http-endpoint=:9809"]);
    assert_eq!(of(&node, kind("registrar")), ["--csi-address=/csi/csi.sock", path, "--http-endpoint=:9809"]);
    assert_eq!(of(&node, kind("livenessprobe")), ["--csi-address=/csi/csi.sock", "--http-endpoint=:9809"]);
    assert!(!kind("registrar").uses_kubernetes() && !kind("livenessprobe").uses_kubernetes());
    assert!(kind("attacher").uses_kubernetes());
}

#[test]
fn the_process_gets_its_own_flags_once() {
    let split = split(argv(&[
        "--sidecars=resizer",
        "--csi-address=/x",
        "--http-endpoint=:8080",
        "--workers=2",
        "--leader-election-shared",
    ]))
    .unwrap();
    assert_eq!(words(&split.process[1..]), ["--csi-address=/x", "--http-endpoint=:8080"]);
    assert!(split.leader_election_shared);
    assert_eq!(split.sidecars.len(), 1);
    assert_eq!(words(&split.sidecars[0].1[..1]), ["csi-resizer"], "each sidecar's parser sees its own program");
}

#[test]
fn the_sidecars_keep_the_order_given_once_each() {
    let split = split(argv(&["--sidecars=snapshotter, provisioner,snapshotter,group-snapshotter"])).unwrap();
    let kinds: Vec<Kind> = split.sidecars.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, [kind("snapshotter"), kind("provisioner"), kind("group-snapshotter")]);
    assert!(!split.leader_election_shared);
}

#[test]
fn version_needs_no_sidecar() {
    // (command line, whether the process is asked for its version alone, before any sidecar's flags are checked)
    let table: &[(&[&str], bool)] = &[
        (&["--version"], true),
        (&["-version"], true),
        (&["--version=true"], true),
        // With sidecars named, their flags are split and checked first; main answers the version afterwards.
        (&["--sidecars=resizer", "--timeout=1s", "--version"], false),
        (&["--sidecars=resizer", "--version=false"], false),
    ];
    for (line, asked) in table {
        let split = split(argv(line)).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(split.sidecars.is_empty(), *asked, "{line:?}");
        if *asked {
            assert_eq!(words(&split.process[1..]), ["--version"], "{line:?}");
        }
    }
    assert_eq!(split(argv(&["--version=maybe"])).err(), Some(CommandLineError::NotABoolean("maybe".into())));
}

#[test]
fn refusals_name_the_flag() {
    let table: &[(&str, &[&str], CommandLineError)] = &[
        ("no --sidecars", &["--timeout=1s"], CommandLineError::NoSidecars),
        (
            "unknown sidecar",
            &["--sidecars=external-health-monitor"],
            CommandLineError::UnknownSidecar("external-health-monitor".into()),
        ),
        (
            "a Kubernetes flag in the node pod's set, which has no Kubernetes client",
            &["--sidecars=registrar,livenessprobe", "--kubeconfig=/k"],
            CommandLineError::NotSelected {
                flag: "--kubeconfig=/k".into(),
                owners: "provisioner, resizer, snapshotter, group-snapshotter, attacher, health-monitor".into(),
            },
        ),
        (
            "unknown flag",
            &["--sidecars=resizer", "--frobnicate=1"],
            CommandLineError::UnknownFlag("--frobnicate=1".into()),
        ),
        (
            "a flag of a sidecar not selected",
            &["--sidecars=resizer", "--capacity-threads=4"],
            CommandLineError::NotSelected { flag: "--capacity-threads=4".into(), owners: "provisioner".into() },
        ),
        (
            "a prefix of a sidecar not selected",
            &["--sidecars=resizer", "--provisioner.timeout=1s"],
            CommandLineError::PrefixNotSelected {
                flag: "--provisioner.timeout=1s".into(),
                sidecar: "provisioner".into(),
            },
        ),
        (
            "a prefixed flag the sidecar does not have",
            &["--sidecars=resizer", "--resizer.capacity-threads=4"],
            CommandLineError::NotAFlagOf {
                flag: "--resizer.capacity-threads=4".into(),
                sidecar: "resizer".into(),
                name: "capacity-threads".into(),
            },
        ),
        (
            "a process flag with a prefix",
            &["--sidecars=resizer", "--resizer.kube-api-qps=50"],
            CommandLineError::ProcessFlagWithPrefix("--resizer.kube-api-qps=50".into()),
        ),
        (
            "a value missing at the end",
            &["--sidecars=resizer", "--csi-address"],
            CommandLineError::MissingValue("--csi-address".into()),
        ),
    ];
    for (case, line, expected) in table {
        assert_eq!(split(argv(line)).as_ref().err(), Some(expected), "{case}");
    }
}

#[test]
fn help_lists_every_flag_once_with_its_sidecars_and_defaults() {
    let help = command().render_long_help().to_string();
    assert_eq!(help.matches("--timeout <TIMEOUT>").count(), 1, "{help}");
    assert!(
        help.contains(
            "[default: provisioner 10s, resizer 10s, snapshotter 1m, attacher 15s, health-monitor 15s, registrar 1s]"
        ),
        "{help}"
    );
    assert!(help.contains("[livenessprobe, registrar]"), "--health-port is theirs: {help}");
    assert!(help.contains("[provisioner]"), "a provisioner-only flag says so");
    assert!(help.contains("--sidecars <NAMES>"));
    assert!(help.contains("--resizer.timeout=2m"), "the prefixes are explained");
}
