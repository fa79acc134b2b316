//! The flag forms driver manifests actually use, parsed as a sidecar would.

use std::time::Duration;

use clap::error::ErrorKind;

use super::*;

/// What a sidecar's parser looks like: the shared sets flattened, plus its own.
#[derive(Debug, clap::Parser)]
#[command(name = "csi-sidecar")]
struct Sidecar {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    retry: RetryArgs,
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    timeout: Duration,
    #[arg(long, default_value_t = 100)]
    worker_threads: u32,
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    volume_name_uuid_length: i32,
}

fn parse(args: &[&str]) -> Result<Sidecar, clap::Error> {
    try_parse_from(std::iter::once("csi-sidecar").chain(args.iter().copied()))
}

fn parse_ok(args: &[&str]) -> Sidecar {
    parse(args).unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

#[test]
fn defaults_are_upstream() {
    let parsed = parse_ok(&[]);
    let c = &parsed.common;
    assert_eq!(c.csi_address, "/run/csi/socket");
    assert_eq!(c.kubeconfig(), None);
    assert_eq!(c.master(), None);
    assert!(!c.version);
    assert!(!c.leader_election);
    assert_eq!(c.leader_election_namespace, None);
    assert_eq!(c.leader_election_lease_duration, Duration::from_secs(15));
    assert_eq!(c.leader_election_renew_deadline, Duration::from_secs(10));
    assert_eq!(c.leader_election_retry_period, Duration::from_secs(5));
    assert!(c.leader_election_labels().is_empty());
    assert_eq!(c.kube_api_qps, 5.0);
    assert_eq!(c.kube_api_burst, 10);
    assert_eq!(c.http_address(), None);
    assert_eq!(c.metrics_path, "/metrics");
    assert_eq!(c.feature_gates(), FeatureGates::default());
    assert_eq!(c.standard.verbosity, 0);
    assert_eq!(c.standard.logging_format, LoggingFormat::Text);
    assert_eq!(parsed.retry.retry_interval_start, Duration::from_secs(1));
    assert_eq!(parsed.retry.retry_interval_max, Duration::from_secs(300));
    assert_eq!(parsed.timeout, Duration::from_secs(10));
}

#[test]
fn every_go_form_of_a_valued_flag() {
    for args in [
        &["-csi-address=/x"][..],
        &["--csi-address=/x"],
        &["--csi-address", "/x"],
        &["-csi-address", "/x"],
        &["--csi-address=/run/other", "--csi-address=/x"],
    ] {
        assert_eq!(parse_ok(args).common.csi_address, "/x", "{args:?}");
    }
}

#[test]
fn every_go_form_of_verbosity() {
    for args in [&["-v=5"][..], &["--v=5"], &["-v", "5"], &["--v", "5"], &["-v5"], &["-v=2", "--v=5"]] {
        assert_eq!(parse_ok(args).common.standard.verbosity, 5, "{args:?}");
    }
}

#[test]
fn every_go_form_of_a_bool_flag() {
    let cases: &[(&[&str], bool)] = &[
        (&[], false),
        (&["--leader-election"], true),
        (&["-leader-election"], true),
        (&["--leader-election=true"], true),
        (&["-leader-election=true"], true),
        (&["--leader-election=false"], false),
        (&["-leader-election=false"], false),
        (&["--leader-election=1"], true),
        (&["--leader-election=F"], false),
        (&["--leader-election", "--leader-election=false"], false),
        (&["--leader-election=false", "--leader-election"], true),
    ];
    for (args, expected) in cases {
        assert_eq!(parse_ok(args).common.leader_election, *expected, "{args:?}");
    }
    assert!(parse_ok(&["--version"]).common.version);
    assert!(parse_ok(&["-automaxprocs"]).common.standard.automaxprocs);
}

#[test]
fn bool_flag_refuses_a_bad_value() {
    let err = parse(&["--leader-election=yes"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ValueValidation);
    assert!(err.to_string().contains("--leader-election"), "{err}");
}

#[test]
fn durations_in_go_syntax() {
    let parsed = parse_ok(&[
        "--leader-election-lease-duration=1m30s",
        "-leader-election-renew-deadline=500ms",
        "--leader-election-retry-period",
        "2h",
        "--timeout=1m",
        "--retry-interval-start=100ms",
        "--retry-interval-max=1.5m",
    ]);
    assert_eq!(parsed.common.leader_election_lease_duration, Duration::from_secs(90));
    assert_eq!(parsed.common.leader_election_renew_deadline, Duration::from_millis(500));
    assert_eq!(parsed.common.leader_election_retry_period, Duration::from_secs(7200));
    assert_eq!(parsed.timeout, Duration::from_secs(60));
    assert_eq!(parsed.retry.retry_interval_start, Duration::from_millis(100));
    assert_eq!(parsed.retry.retry_interval_max, Duration::from_secs(90));

    let err = parse(&["--timeout=15"]).unwrap_err();
    assert!(err.to_string().contains("--timeout"), "{err}");
}

#[test]
fn unknown_flags_are_errors_naming_them() {
    for (args, name) in [
        (&["--provisioner=foo"][..], "--provisioner"),
        (&["-connection-timeout=10s"], "--connection-timeout"),
        (&["--enable-leader-election"], "--enable-leader-election"),
        (&["-x"], "-x"),
    ] {
        let err = parse(args).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownArgument, "{args:?}");
        assert!(err.to_string().contains(name), "{args:?}: {err}");
    }
}

#[test]
fn http_endpoint_and_metrics_address() {
    let parsed = parse_ok(&["--http-endpoint=:8080"]);
    assert_eq!(parsed.common.http_address(), Some(":8080"));
    assert!(!parsed.common.metrics_only());

    let parsed = parse_ok(&["-metrics-address=:9090", "-metrics-path=/m"]);
    assert_eq!(parsed.common.http_address(), Some(":9090"));
    assert!(parsed.common.metrics_only());
    assert_eq!(parsed.common.metrics_path, "/m");

    assert_eq!(parse_ok(&["--http-endpoint="]).common.http_address(), None);

    let err = parse(&["--http-endpoint=:8080", "--metrics-address=:9090"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
}

#[test]
fn feature_gates_and_labels_accumulate() {
    let parsed = parse_ok(&[
        "--feature-gates=ReleaseLeaderElectionOnExit=true,Topology=false",
        "-feature-gates=Topology=true",
        "--leader-election-labels=a:1,b:2",
        "--leader-election-labels=b:3",
    ]);
    let gates = parsed.common.feature_gates();
    assert!(gates.enabled("ReleaseLeaderElectionOnExit", false));
    assert!(gates.enabled("Topology", false));
    let labels: Vec<(String, String)> = parsed.common.leader_election_labels().into_iter().collect();
    assert_eq!(labels, vec![("a".into(), "1".into()), ("b".into(), "3".into())]);

    assert!(parse(&["--feature-gates=Topology"]).is_err());
    assert!(parse(&["--leader-election-labels=a=1"]).is_err());
}

#[test]
fn numbers_logging_and_kube_flags() {
    let parsed = parse_ok(&[
        "--kube-api-qps=50.5",
        "--kube-api-burst=100",
        "--logging-format=json",
        "--kubeconfig=/etc/kube.conf",
        "--master=https://10.0.0.1:6443",
        "--leader-election-namespace=kube-system",
        "--worker-threads=3",
        "--volume-name-uuid-length",
        "-1",
        "--vmodule=foo=5",
        "--log-flush-frequency=5s",
        "--log-text-split-stream",
        "--log-json-split-stream=false",
        "--log-text-info-buffer-size=4Ki",
        "--log-json-info-buffer-size=0",
    ]);
    let c = &parsed.common;
    assert_eq!(c.kube_api_qps, 50.5);
    assert_eq!(c.kube_api_burst, 100);
    assert_eq!(c.standard.logging_format, LoggingFormat::Json);
    assert_eq!(c.kubeconfig(), Some(std::path::Path::new("/etc/kube.conf")));
    assert_eq!(c.master(), Some("https://10.0.0.1:6443"));
    assert_eq!(c.leader_election_namespace.as_deref(), Some("kube-system"));
    assert_eq!(parsed.worker_threads, 3);
    assert_eq!(parsed.volume_name_uuid_length, -1);
    assert!(c.standard.log_text_split_stream && !c.standard.log_json_split_stream);
    assert_eq!(c.standard.log_text_info_buffer_size.as_deref(), Some("4Ki"));
    assert_eq!(parse_ok(&["--kube-api-qps=-1"]).common.kube_api_qps, -1.0);
    assert!(parse(&["--logging-format=xml"]).is_err());
}

#[test]
fn a_typical_manifest_line() {
    // As in csi-driver-host-path's deployment.
    let parsed = parse_ok(&[
        "-v=5",
        "-csi-address=/csi/csi.sock",
        "-feature-gates=Topology=true",
        "--leader-election",
        "--leader-election-namespace=default",
        "-http-endpoint=:8080",
        "--timeout=30s",
    ]);
    assert_eq!(parsed.common.standard.verbosity, 5);
    assert_eq!(parsed.common.csi_address, "/csi/csi.sock");
    assert!(parsed.common.leader_election);
    assert_eq!(parsed.common.http_address(), Some(":8080"));
    assert_eq!(parsed.timeout, Duration::from_secs(30));
}

#[test]
fn standard_flags_are_listed() {
    #[derive(Debug, clap::Parser)]
    struct Standard {
        #[command(flatten)]
        standard: StandardArgs,
    }
    assert_eq!(long_flag_names::<Standard>(), STANDARD_FLAGS);
}
