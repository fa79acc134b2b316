//! The Helm charts as a user installs them: lint and render with default and full values, every rendered object
//! accepted by the real API server, both charts installed into the control plane, and sidecars run with the
//! chart's own arguments under the ServiceAccount the chart created (proving its RBAC is enough to do the job).

use std::time::Duration;

use csi_sidecars_e2e::charts::{
    Chart, Release, container_args, documents, dry_run_apply, enforce_pod_security, lint, on_this_host, template,
};
use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::{free_port, try_http_get};
use csi_sidecars_e2e::processes::rbac::{account_kubeconfig, policy_rule};
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::wait::wait_for;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld, TIMEOUT};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

#[test]
fn both_charts_lint_and_render_with_default_and_full_values() {
    for chart in Chart::ALL {
        for (label, values) in chart.value_sets() {
            lint(chart, &values).unwrap_or_else(|e| panic!("{} with {label}: {e}", chart.name()));
            let rendered = template(chart, "lint", "storage", &values)
                .unwrap_or_else(|e| panic!("{} with {label}: {e}", chart.name()));
            let kinds: Vec<String> = documents(&rendered).iter().map(|d| d["kind"].as_str().unwrap().into()).collect();
            for kind in ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"] {
                assert!(kinds.iter().any(|k| k == kind), "{} with {label} renders no {kind}: {kinds:?}", chart.name());
            }
            // The node half and the CSIDriver are off by default and on in the full values.
            let node_half = chart == Chart::CsiSidecars && label == "full values";
            for kind in ["DaemonSet", "CSIDriver"] {
                assert_eq!(kinds.iter().any(|k| k == kind), node_half, "{} with {label}: {kind}", chart.name());
            }
        }
    }
}

#[test]
fn values_the_schema_refuses_fail_to_render() {
    let rows: [(Chart, &str, &str); 8] = [
        (Chart::CsiSidecars, "replicas=-1", "minimum"),
        (Chart::CsiSidecars, "provisioner.timeout=ten", "pattern"),
        (Chart::CsiSidecars, "loggingFormat=xml", "loggingFormat"),
        (Chart::CsiSidecars, "resizer.unknownOption=true", "unknownOption"),
        (Chart::CsiSidecars, "node.kubeletDir=var/lib/kubelet", "pattern"),
        (Chart::CsiSidecars, "node.registrar.httpPort=0", "minimum"),
        (Chart::CsiSidecars, "csiDriver.fsGroupPolicy=Always", "fsGroupPolicy"),
        (Chart::SnapshotController, "leaderElection.leaseDuration=15x", "pattern"),
    ];
    for (chart, set, expected) in rows {
        let error = template(chart, "bad", "storage", &["--set".into(), set.into()]).expect_err(set);
        assert!(error.contains(expected), "{set}: {error}");
    }
}

#[test]
fn the_sidecar_chart_deploys_what_its_values_enable() {
    let containers = |values: &[&str]| -> Vec<String> {
        let values: Vec<String> = values.iter().flat_map(|v| ["--set".to_string(), v.to_string()]).collect();
        let rendered = template(Chart::CsiSidecars, "r", "storage", &values).unwrap();
        let deployment = documents(&rendered).into_iter().find(|d| d["kind"] == "Deployment").unwrap();
        let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().unwrap().clone();
        containers.iter().map(|c| c["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(containers(&[]), ["driver", "csi-provisioner", "csi-resizer"]);
    assert_eq!(
        containers(&["resizer.enabled=false", "snapshotter.enabled=true"]),
        ["driver", "csi-provisioner", "csi-snapshotter"]
    );
    assert_eq!(containers(&["attacher.enabled=true"]), ["driver", "csi-attacher", "csi-provisioner", "csi-resizer"]);
}

/// Group snapshots are on by default since external-snapshotter v8.7.0 (the gate is GA): the charts render the gate
/// only to turn them off, so the default install passes no GA gate (which upstream warns about).
#[test]
fn the_group_snapshot_values_render_the_gate_only_to_turn_groups_off() {
    let args = |chart: Chart, container: &str, values: &[&str]| -> Vec<String> {
        let values: Vec<String> = values.iter().flat_map(|v| ["--set".to_string(), v.to_string()]).collect();
        container_args(&template(chart, "r", "storage", &values).unwrap(), container, &[])
    };
    let gates =
        |args: Vec<String>| -> Vec<String> { args.into_iter().filter(|a| a.contains("feature-gates")).collect() };
    let off = ["--feature-gates=CSIVolumeGroupSnapshot=false".to_string()];
    let on = ["snapshotter.enabled=true"];
    let turned_off = ["snapshotter.enabled=true", "snapshotter.groupSnapshots=false"];
    assert_eq!(gates(args(Chart::CsiSidecars, "csi-snapshotter", &on)), [] as [String; 0]);
    assert_eq!(gates(args(Chart::CsiSidecars, "csi-snapshotter", &turned_off)), off);
    let combined =
        |values: &[&str]| gates(args(Chart::CsiSidecars, "csi-sidecars", &[&["mode=combined"], values].concat()));
    assert_eq!(combined(&on), [] as [String; 0]);
    assert_eq!(combined(&turned_off), ["--snapshotter.feature-gates=CSIVolumeGroupSnapshot=false"]);
    assert_eq!(gates(args(Chart::SnapshotController, "snapshot-controller", &[])), [] as [String; 0]);
    let controller_off = ["featureGates.volumeGroupSnapshot=false"];
    assert_eq!(gates(args(Chart::SnapshotController, "snapshot-controller", &controller_off)), off);
}

/// The rendered object of `kind` for `--set` `values`.
fn rendered(kind: &str, values: &[&str]) -> Result<serde_json::Value, String> {
    let values: Vec<String> = values.iter().flat_map(|v| ["--set".to_string(), v.to_string()]).collect();
    let rendered = template(Chart::CsiSidecars, "r", "storage", &values)?;
    Ok(documents(&rendered).into_iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("no {kind}")))
}

#[test]
fn a_driver_its_sidecars_could_not_connect_to_is_refused_with_the_ways_out() {
    // By default the pod runs every container as 65532: the driver too, so its socket is the sidecars' user's.
    let deployment = rendered("Deployment", &[]).unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    let driver = pod["containers"].as_array().unwrap().iter().find(|c| c["name"] == "driver").unwrap();
    assert!(driver["securityContext"]["runAsUser"].is_null(), "the driver inherits the pod's user: {driver}");

    let refused = rendered("Deployment", &["driver.securityContext.runAsUser=0"]).unwrap_err();
    assert!(refused.contains("the driver runs as user 0 and the sidecars as user 65532"), "{refused}");
    for way_out in ["driver.securityContext.runAsUser=65532", "securityContext.runAsUser=0", "reachableByOtherUsers"] {
        assert!(refused.contains(way_out), "{way_out}: {refused}");
    }
    // Either way out renders: the sidecars as the driver's user (as upstream's manifests run them), or a driver
    // that opens its socket to them.
    let root =
        ["driver.securityContext.runAsUser=0", "securityContext.runAsUser=0", "securityContext.runAsNonRoot=false"];
    rendered("Deployment", &root).unwrap();
    rendered("Deployment", &["driver.securityContext.runAsUser=0", "socket.reachableByOtherUsers=true"]).unwrap();
    // driver.runAsRoot: the driver and the sidecars as root in one value.
    let as_root = rendered("Deployment", &["driver.runAsRoot=true"]).unwrap();
    let users: Vec<&Value> = as_root["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["securityContext"]["runAsUser"])
        .collect();
    assert_eq!(users, [0, 0, 0], "driver, csi-provisioner, csi-resizer");
    let combined = rendered("Deployment", &["mode=combined", "driver.securityContext.runAsUser=1000"]).unwrap_err();
    assert!(combined.contains("the driver runs as user 1000"), "{combined}");
}

#[test]
fn the_node_half_mounts_the_kubelets_directories_and_registers_the_drivers_socket() {
    let values = ["node.enabled=true", "driver.name=hostpath.csi.k8s.io", "image.registry=registry.example.com"];
    let daemonset = rendered("DaemonSet", &values).unwrap();
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "r-csi-sidecars-node");
    let containers = pod["containers"].as_array().unwrap();
    let names: Vec<&str> = containers.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["driver", "csi-node-driver-registrar", "livenessprobe"]);

    // mode: combined: one csi-sidecars container for both, each health check on its own port as before.
    let combined =
        rendered("DaemonSet", &[&values[..], &["mode=combined", "node.registrar.extraArgs={--timeout=5s}"]].concat())
            .unwrap();
    let combined_containers = combined["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    let names: Vec<&str> = combined_containers.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["driver", "csi-sidecars"]);
    let args: Vec<&str> =
        combined_containers[1]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for expected in [
        "--sidecars=registrar,livenessprobe",
        "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)",
        "--registrar.health-port=9809",
        "--livenessprobe.health-port=9808",
        "--registrar.timeout=5s",
    ] {
        assert!(args.contains(&expected), "{expected} missing: {args:?}");
    }
    assert_eq!(combined_containers[1]["livenessProbe"]["httpGet"]["port"], "registrar");
    assert_eq!(
        combined_containers[0]["livenessProbe"]["httpGet"]["port"], "healthz",
        "the driver's, on livenessprobe's port"
    );

    let driver = &containers[0];
    assert_eq!(driver["securityContext"]["privileged"], true, "mounting needs it");
    assert_eq!(driver["livenessProbe"]["httpGet"]["port"], "healthz");
    assert_eq!(driver["ports"][0]["containerPort"], 9808, "livenessprobe's port, probed on the driver");
    let propagated: Vec<(&str, &str)> = driver["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| Some((m["mountPath"].as_str()?, m["mountPropagation"].as_str()?)))
        .collect();
    assert_eq!(propagated, [("/var/lib/kubelet/pods", "Bidirectional"), ("/var/lib/kubelet/plugins", "Bidirectional")]);

    let registrar = &containers[1];
    assert_eq!(registrar["image"], "registry.example.com/csi-node-driver-registrar:0.1.0");
    let env = |c: &serde_json::Value, name: &str| -> String {
        let var = c["env"].as_array().unwrap().iter().find(|e| e["name"] == name).unwrap();
        var["value"].as_str().unwrap().to_string()
    };
    assert_eq!(env(registrar, "DRIVER_REG_SOCK_PATH"), "/var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock");
    assert_eq!(env(registrar, "ADDRESS"), "/csi/csi.sock");
    let args: Vec<&str> = registrar["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)"), "{args:?}");
    assert_eq!(containers[2]["image"], "registry.example.com/livenessprobe:0.1.0");
    let kept = rendered("DaemonSet", &["node.enabled=true", "node.registrar.image=example.com/registrar:v2"]).unwrap();
    assert_eq!(
        kept["spec"]["template"]["spec"]["containers"][1]["image"], "example.com/registrar:v2",
        "another registrar"
    );
    for sidecar in &containers[1..] {
        let name = sidecar["name"].as_str().unwrap();
        let security = &sidecar["securityContext"];
        // Root (the kubelet's registration directory and the driver's socket are root's), and nothing more.
        assert_eq!(security["runAsUser"], 0, "{name}");
        assert_eq!(security["privileged"], false, "{name}");
        assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{name}");
    }
    let host_paths: Vec<(&str, &str)> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["hostPath"]["path"].as_str().unwrap()))
        .collect();
    assert_eq!(
        host_paths,
        [
            ("socket-dir", "/var/lib/kubelet/plugins/hostpath.csi.k8s.io"),
            ("mountpoint-dir", "/var/lib/kubelet/pods"),
            ("plugins-dir", "/var/lib/kubelet/plugins"),
            ("registration-dir", "/var/lib/kubelet/plugins_registry"),
        ]
    );
    // The node pods are not the controller Deployment's, nor its metrics Service's.
    let deployment = rendered("Deployment", &values).unwrap();
    assert_eq!(deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"], "controller");
    assert_eq!(daemonset["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"], "node");

    let csi_driver = rendered("CSIDriver", &["csiDriver.enabled=true", "csiDriver.fsGroupPolicy=File"]).unwrap();
    assert_eq!(csi_driver["metadata"]["name"], "hostpath.csi.k8s.io");
    assert_eq!(
        csi_driver["spec"],
        json!({"attachRequired": false, "podInfoOnMount": false, "fsGroupPolicy": "File",
               "volumeLifecycleModes": ["Persistent"], "requiresRepublish": false, "storageCapacity": false,
               "seLinuxMount": false})
    );
}

#[test]
fn every_sidecar_container_is_locked_down_and_probed_on_its_leader_election_health() {
    for chart in Chart::ALL {
        let rendered =
            template(chart, "r", "storage", &["-f".into(), chart.full_values().display().to_string()]).unwrap();
        let deployment = documents(&rendered).into_iter().find(|d| d["kind"] == "Deployment").unwrap();
        assert_eq!(deployment["spec"]["replicas"], 2, "{}", chart.name());
        let pod = &deployment["spec"]["template"]["spec"];
        for container in pod["containers"].as_array().unwrap().iter().filter(|c| c["name"] != "driver") {
            let name = container["name"].as_str().unwrap();
            let security = &container["securityContext"];
            assert_eq!(security["runAsNonRoot"], true, "{name}");
            assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");
            assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
            assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{name}");
            assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault", "{name}");
            let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
            assert!(args.contains(&"--leader-election=true"), "{name}: {args:?}");
            let port = container["ports"][0]["containerPort"].as_i64().unwrap();
            assert!(args.contains(&format!("--http-endpoint=:{port}").as_str()), "{name}: {args:?}");
            for probe in ["livenessProbe", "readinessProbe"] {
                assert_eq!(container[probe]["httpGet"]["path"], "/healthz/leader-election", "{name} {probe}");
            }
        }
    }
}

/// A stand-in for prometheus-operator's ServiceMonitor CRD (any spec accepted), so the dry run can admit the
/// chart's ServiceMonitor as a cluster with the operator would; its own schema is the operator's business.
async fn install_service_monitor_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor",
                      "listKind": "ServiceMonitorList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        "servicemonitors.monitoring.coreos.com",
        &PatchParams::apply("csi-sidecars-e2e").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply the ServiceMonitor CRD");
    wait_for("ServiceMonitor CRD established", Duration::from_secs(30), || async {
        let crd = api.get("servicemonitors.monitoring.coreos.com").await.ok()?;
        crd.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    })
    .await;
}

#[tokio::test]
async fn every_rendered_object_is_accepted_by_the_api_server() {
    let client = Cluster::shared().client().await;
    install_snapshot_crds(&client).await;
    install_service_monitor_crd(&client).await;
    let ns = csi_sidecars_e2e::control_plane::namespace::TestNamespace::create(&client, "chart-dry-run").await;
    for chart in Chart::ALL {
        for (label, values) in chart.value_sets() {
            let rendered = template(chart, "dry-run", ns.name(), &values).unwrap();
            let applied = dry_run_apply(ns.name(), &rendered)
                .unwrap_or_else(|e| panic!("{} with {label} refused: {e}", chart.name()));
            let objects = documents(&rendered).len();
            assert_eq!(
                applied.lines().count(),
                objects,
                "{} with {label}: one line per object:\n{applied}",
                chart.name()
            );
        }
    }
}

async fn leader_election_healthy(port: u16) {
    wait_for(&format!("/healthz/leader-election on :{port}"), TIMEOUT, || async {
        let (status, body) = try_http_get(port, "/healthz/leader-election").await?;
        (status == 200).then_some(body)
    })
    .await;
}

async fn lease_held(client: &kube::Client, namespace: &str, name: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    wait_for(&format!("Lease {name} held"), TIMEOUT, || async {
        let holder = leases.get(name).await.ok()?.spec?.holder_identity?;
        (!holder.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn both_charts_install_and_their_sidecars_work_under_the_chart_accounts() {
    let mut world = ProvisionerWorld::new("chart-install", &[]).await;
    let client = world.client.clone();
    install_snapshot_crds(&client).await;
    let ns = world.ns().to_string();
    let driver = world.driver.clone();
    let controller = Release::install(Chart::SnapshotController, &format!("{ns}-sc"), &ns, &[]);
    let sidecars = Release::install(
        Chart::CsiSidecars,
        &ns,
        &ns,
        &["--set".into(), format!("driver.name={driver}"), "--set".into(), "snapshotter.enabled=true".into()],
    );

    // csi-provisioner, with the chart's args, as the chart's ServiceAccount: it leads and provisions a claim.
    let account = format!("{ns}-csi-sidecars");
    let kubeconfig = account_kubeconfig(
        &client,
        &ns,
        &account,
        &policy_rule("", "persistentvolumes", "create"),
        world.scenario.dir(),
    )
    .await;
    let socket = world.socket.display().to_string();
    let vars = [("ADDRESS", socket.as_str()), ("NAMESPACE", ns.as_str())];
    let port = free_port();
    let args = on_this_host(container_args(&sidecars.manifest(), "csi-provisioner", &vars), port, &kubeconfig);
    let _provisioner = world.scenario.start("csi-provisioner", &binary("csi-provisioner"), &args);
    leader_election_healthy(port).await;
    lease_held(&client, &ns, &driver.replace('.', "-")).await;
    world.node("n1").await;
    let class = world.class("chart", &[], "Delete").await;
    world.claim("data", &class, None, "ReadWriteOnce").await;
    let volume = world.bound("data").await;
    world.claims().delete("data", &DeleteParams::default()).await.unwrap();
    let volumes = world.volumes();
    wait_for(&format!("PV {volume} deleted"), TIMEOUT, || async {
        volumes.get_opt(&volume).await.ok()?.is_none().then_some(())
    })
    .await;
    world.no_plugin_volumes_left().await;

    // snapshot-controller, with its chart's args, as its chart's ServiceAccount: it takes its Lease.
    let account = format!("{ns}-sc-snapshot-controller");
    let probe = policy_rule("snapshot.storage.k8s.io", "volumesnapshotcontents", "create");
    let kubeconfig = account_kubeconfig(&client, &ns, &account, &probe, world.scenario.dir()).await;
    let port = free_port();
    let args = on_this_host(container_args(&controller.manifest(), "snapshot-controller", &vars), port, &kubeconfig);
    let _controller = world.scenario.start("snapshot-controller", &binary("snapshot-controller"), &args);
    leader_election_healthy(port).await;
    lease_held(&client, &ns, "snapshot-controller-leader").await;
}

/// `mode: combined`, full values: what the chart renders, with the flags of the full values' sidecars.
fn combined_render() -> Vec<serde_json::Value> {
    let full = Chart::CsiSidecars.full_values().display().to_string();
    let values = ["-f".to_string(), full, "--set".into(), "mode=combined".into()];
    documents(&template(Chart::CsiSidecars, "r", "storage", &values).unwrap())
}

#[test]
fn the_combined_mode_runs_one_container_with_each_sidecars_flags_prefixed() {
    let combined = combined_render();
    let deployment = combined.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    let names: Vec<&str> = containers.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["driver", "csi-sidecars"]);
    let container = &containers[1];
    assert_eq!(container["image"], "registry.example.com/storage/csi-sidecars:0.1.0");
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for expected in [
        "--sidecars=attacher,provisioner,resizer,snapshotter",
        "--http-endpoint=:8080",
        "--leader-election=true",
        "--leader-election-shared=false",
        "--provisioner.timeout=10s",
        "--resizer.timeout=10s",
        "--snapshotter.timeout=1m",
        "--attacher.timeout=15s",
        "--attacher.worker-threads=20",
        "--provisioner.extra-create-metadata",
        "--provisioner.default-fstype=ext4",
        "--resizer.handle-volume-inuse-error=false",
    ] {
        assert!(args.contains(&expected), "{expected} missing: {args:?}");
    }
    assert_eq!(args.iter().filter(|a| a.starts_with("--csi-address")).count(), 1, "process flags once: {args:?}");
    let security = &container["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["path"], "/healthz/leader-election", "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "sidecars", "{probe}");
    }
    let service = combined.iter().find(|d| d["kind"] == "Service").unwrap();
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "sidecars", "port": 8080, "targetPort": "sidecars", "protocol": "TCP"}])
    );
    let monitor = combined.iter().find(|d| d["kind"] == "ServiceMonitor").unwrap();
    assert_eq!(monitor["spec"]["endpoints"].as_array().unwrap().len(), 1);

    // The same rules as the separate containers: the union of the enabled sidecars', for the one ServiceAccount.
    let full = Chart::CsiSidecars.full_values().display().to_string();
    let separate = documents(&template(Chart::CsiSidecars, "r", "storage", &["-f".into(), full]).unwrap());
    let rules = |rendered: &[serde_json::Value]| -> Vec<serde_json::Value> {
        rendered.iter().filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role").cloned().collect()
    };
    assert_eq!(rules(&combined), rules(&separate));
}

#[tokio::test]
async fn the_combined_mode_is_accepted_by_the_api_server() {
    let client = Cluster::shared().client().await;
    install_snapshot_crds(&client).await;
    install_service_monitor_crd(&client).await;
    let ns = csi_sidecars_e2e::control_plane::namespace::TestNamespace::create(&client, "chart-combined").await;
    let full = Chart::CsiSidecars.full_values().display().to_string();
    let values = ["-f".to_string(), full, "--set".into(), "mode=combined".into()];
    let rendered = template(Chart::CsiSidecars, "dry-run", ns.name(), &values).unwrap();
    let applied = dry_run_apply(ns.name(), &rendered).unwrap_or_else(|e| panic!("mode=combined refused: {e}"));
    assert_eq!(applied.lines().count(), documents(&rendered).len(), "one line per object:\n{applied}");
}

#[tokio::test]
async fn the_combined_process_works_with_the_charts_args_under_the_charts_account() {
    let mut world = ProvisionerWorld::new("chart-combined", &[]).await;
    let client = world.client.clone();
    install_snapshot_crds(&client).await;
    let ns = world.ns().to_string();
    let driver = world.driver.clone();
    let values = ["driver.name", "mode", "snapshotter.enabled"]
        .into_iter()
        .zip([driver.as_str(), "combined", "true"])
        .flat_map(|(key, value)| ["--set".to_string(), format!("{key}={value}")])
        .collect::<Vec<_>>();
    let sidecars = Release::install(Chart::CsiSidecars, &ns, &ns, &values);

    let account = format!("{ns}-csi-sidecars");
    let probe = policy_rule("", "persistentvolumes", "create");
    let kubeconfig = account_kubeconfig(&client, &ns, &account, &probe, world.scenario.dir()).await;
    let socket = world.socket.display().to_string();
    let vars = [("ADDRESS", socket.as_str()), ("NAMESPACE", ns.as_str())];
    let port = free_port();
    let args = on_this_host(container_args(&sidecars.manifest(), "csi-sidecars", &vars), port, &kubeconfig);
    let _process = world.scenario.start("csi-sidecars", &binary("csi-sidecars"), &args);
    leader_election_healthy(port).await;
    let lease = driver.replace('.', "-");
    for name in [lease.clone(), format!("external-resizer-{lease}"), format!("external-snapshotter-leader-{lease}")] {
        lease_held(&client, &ns, &name).await;
    }
    world.node("n1").await;
    let class = world.class("chart", &[], "Delete").await;
    world.claim("data", &class, None, "ReadWriteOnce").await;
    world.bound("data").await;
}

// ---- Pod Security ------------------------------------------------------------------------------------------------

/// One rule of the "restricted" Pod Security Standard (kubernetes.io/docs/concepts/security/pod-security-standards,
/// the baseline controls included): its name and what breaks it in a pod spec, one line per offending container.
type PodRule = (&'static str, fn(&Value) -> Vec<String>);

/// The pod's containers of every kind (init, ephemeral and regular), as (name, container).
fn every_container(pod: &Value) -> Vec<(String, &Value)> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|kind| pod[*kind].as_array().into_iter().flatten())
        .map(|c| (c["name"].as_str().unwrap_or("?").to_string(), c))
        .collect()
}

/// The containers for which `breaks(container, its securityContext)` holds.
fn containers_where(pod: &Value, breaks: impl Fn(&Value, &Value) -> bool) -> Vec<String> {
    every_container(pod).into_iter().filter(|(_, c)| breaks(c, &c["securityContext"])).map(|(name, _)| name).collect()
}

/// A setting of the container's securityContext, else the pod's.
fn effective<'a>(pod: &'a Value, security: &'a Value, key: &str) -> &'a Value {
    if security[key].is_null() { &pod["securityContext"][key] } else { &security[key] }
}

const SAFE_SYSCTLS: [&str; 9] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
];
const RESTRICTED_VOLUMES: [&str; 9] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

const RESTRICTED: [PodRule; 16] = [
    ("host namespaces", |pod| {
        let shared = ["hostNetwork", "hostPID", "hostIPC"].into_iter().filter(|k| pod[*k] == true);
        shared.map(|k| format!("pod: {k}")).collect()
    }),
    ("HostProcess", |pod| {
        let host_process = |s: &Value| s["windowsOptions"]["hostProcess"] == true;
        let mut found = containers_where(pod, |_, s| host_process(s));
        found.extend(host_process(&pod["securityContext"]).then(|| "pod".to_string()));
        found
    }),
    ("privileged containers", |pod| containers_where(pod, |_, s| s["privileged"] == true)),
    ("host ports", |pod| {
        containers_where(pod, |c, _| {
            c["ports"].as_array().into_iter().flatten().any(|p| p["hostPort"].as_i64() > Some(0))
        })
    }),
    ("AppArmor", |pod| {
        let unconfined = |s: &Value| s["appArmorProfile"]["type"] == "Unconfined";
        let mut found = containers_where(pod, |_, s| unconfined(s));
        found.extend(unconfined(&pod["securityContext"]).then(|| "pod".to_string()));
        found
    }),
    ("SELinux", |pod| {
        let bad = |s: &Value| {
            let options = &s["seLinuxOptions"];
            let kind = options["type"].as_str().unwrap_or("");
            !options["user"].is_null()
                || !options["role"].is_null()
                || !["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"].contains(&kind)
        };
        let mut found = containers_where(pod, |_, s| bad(s));
        found.extend(bad(&pod["securityContext"]).then(|| "pod".to_string()));
        found
    }),
    ("/proc mount type", |pod| containers_where(pod, |_, s| !s["procMount"].is_null() && s["procMount"] != "Default")),
    ("sysctls", |pod| {
        let sysctls = pod["securityContext"]["sysctls"].as_array().cloned().unwrap_or_default();
        let unsafe_ = sysctls.into_iter().filter(|s| !SAFE_SYSCTLS.contains(&s["name"].as_str().unwrap_or("")));
        unsafe_.map(|s| format!("pod: {}", s["name"])).collect()
    }),
    ("hostPath volumes", |pod| {
        let volumes = pod["volumes"].as_array().into_iter().flatten();
        volumes.filter(|v| !v["hostPath"].is_null()).map(|v| format!("volume {}", v["name"])).collect()
    }),
    ("volume types", |pod| {
        let volumes = pod["volumes"].as_array().into_iter().flatten();
        let source = |v: &Value| v.as_object().into_iter().flatten().map(|(k, _)| k.clone()).find(|k| k != "name");
        let other = volumes.filter(|v| !source(v).is_some_and(|k| RESTRICTED_VOLUMES.contains(&k.as_str())));
        other.map(|v| format!("volume {}", v["name"])).collect()
    }),
    ("privilege escalation", |pod| containers_where(pod, |_, s| s["allowPrivilegeEscalation"] != false)),
    ("running as non-root", |pod| {
        containers_where(pod, |_, s| s["runAsNonRoot"] == false || effective(pod, s, "runAsNonRoot") != true)
    }),
    ("running as non-root user", |pod| {
        let mut found = containers_where(pod, |_, s| s["runAsUser"] == 0);
        found.extend((pod["securityContext"]["runAsUser"] == 0).then(|| "pod".to_string()));
        found
    }),
    ("seccomp", |pod| {
        let unconfined = pod["securityContext"]["seccompProfile"]["type"] == "Unconfined";
        let mut found = containers_where(pod, |_, s| {
            let kind = effective(pod, s, "seccompProfile")["type"].as_str().unwrap_or("");
            !["RuntimeDefault", "Localhost"].contains(&kind)
        });
        found.extend(unconfined.then(|| "pod".to_string()));
        found
    }),
    ("capabilities dropped", |pod| {
        containers_where(pod, |_, s| !s["capabilities"]["drop"].as_array().into_iter().flatten().any(|d| d == "ALL"))
    }),
    ("capabilities added", |pod| {
        containers_where(pod, |_, s| {
            s["capabilities"]["add"].as_array().into_iter().flatten().any(|a| a != "NET_BIND_SERVICE")
        })
    }),
];

/// What in `pod` (a pod spec) breaks "restricted": (rule, offender) for each.
fn restricted_violations(pod: &Value) -> Vec<(&'static str, String)> {
    RESTRICTED.iter().flat_map(|(rule, breaks)| breaks(pod).into_iter().map(move |what| (*rule, what))).collect()
}

/// A pod spec meeting "restricted" with every setting on the container, for the rules' own table.
fn restricted_pod() -> Value {
    json!({
        "containers": [{
            "name": "c",
            "ports": [{"containerPort": 8080}],
            "securityContext": {
                "runAsNonRoot": true, "runAsUser": 65532, "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                "seccompProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"type": "container_t"},
                "procMount": "Default", "appArmorProfile": {"type": "RuntimeDefault"}
            }
        }],
        "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
        "volumes": [{"name": "socket", "emptyDir": {}}, {"name": "config", "configMap": {"name": "x"}}]
    })
}

/// Sets `value` at the JSON `pointer` in `document`, making the objects on the way.
fn set_at(document: &mut Value, pointer: &str, value: Value) {
    let mut at = document;
    for key in pointer.split('/').skip(1) {
        at = match key.parse::<usize>() {
            Ok(index) => &mut at[index],
            Err(_) => {
                if at.is_null() {
                    *at = json!({});
                }
                &mut at[key]
            }
        };
    }
    *at = value;
}

#[test]
fn each_restricted_rule_catches_what_breaks_it_and_nothing_else() {
    assert_eq!(restricted_violations(&restricted_pod()), [], "the compliant pod");
    // The same settings on the pod instead of the container meet the rules too.
    let mut pod_level = restricted_pod();
    let security = pod_level["containers"][0]["securityContext"].as_object_mut().unwrap();
    security.remove("runAsNonRoot");
    security.remove("seccompProfile");
    pod_level["securityContext"]["runAsNonRoot"] = json!(true);
    pod_level["securityContext"]["seccompProfile"] = json!({"type": "Localhost", "localhostProfile": "p.json"});
    assert_eq!(restricted_violations(&pod_level), [], "pod-level settings");

    // (the change, as a JSON pointer and a value; the rule it breaks)
    let rows: [(&str, Value, &str); 21] = [
        ("/hostNetwork", json!(true), "host namespaces"),
        ("/hostPID", json!(true), "host namespaces"),
        ("/containers/0/securityContext/windowsOptions", json!({"hostProcess": true}), "HostProcess"),
        ("/containers/0/securityContext/privileged", json!(true), "privileged containers"),
        ("/containers/0/ports/0/hostPort", json!(8080), "host ports"),
        ("/containers/0/securityContext/appArmorProfile/type", json!("Unconfined"), "AppArmor"),
        ("/containers/0/securityContext/seLinuxOptions/type", json!("spc_t"), "SELinux"),
        ("/containers/0/securityContext/seLinuxOptions/user", json!("root"), "SELinux"),
        ("/containers/0/securityContext/procMount", json!("Unmasked"), "/proc mount type"),
        ("/securityContext/sysctls/0/name", json!("kernel.msgmax"), "sysctls"),
        ("/volumes/1", json!({"name": "nfs", "nfs": {"server": "s", "path": "/"}}), "volume types"),
        ("/containers/0/securityContext/allowPrivilegeEscalation", json!(true), "privilege escalation"),
        ("/containers/0/securityContext/allowPrivilegeEscalation", Value::Null, "privilege escalation"),
        ("/containers/0/securityContext/runAsNonRoot", json!(false), "running as non-root"),
        ("/containers/0/securityContext/runAsNonRoot", Value::Null, "running as non-root"),
        ("/containers/0/securityContext/runAsUser", json!(0), "running as non-root user"),
        ("/containers/0/securityContext/seccompProfile/type", json!("Unconfined"), "seccomp"),
        ("/containers/0/securityContext/seccompProfile", Value::Null, "seccomp"),
        ("/containers/0/securityContext/capabilities/drop", json!(["NET_RAW"]), "capabilities dropped"),
        ("/containers/0/securityContext/capabilities/add", json!(["SYS_ADMIN"]), "capabilities added"),
        ("/containers/0/securityContext/capabilities/add", json!(["NET_BIND_SERVICE", "CHOWN"]), "capabilities added"),
    ];
    for (pointer, value, rule) in rows {
        let mut pod = restricted_pod();
        set_at(&mut pod, pointer, value.clone());
        let rules: Vec<&str> = restricted_violations(&pod).into_iter().map(|(rule, _)| rule).collect();
        assert_eq!(rules, [rule], "{pointer} = {value}");
    }
    // A hostPath volume breaks both volume rules.
    let mut pod = restricted_pod();
    pod["volumes"][1] = json!({"name": "host", "hostPath": {"path": "/"}});
    let rules: Vec<&str> = restricted_violations(&pod).into_iter().map(|(rule, _)| rule).collect();
    assert_eq!(rules, ["hostPath volumes", "volume types"]);
}

/// The pod spec of the `kind` (Deployment or DaemonSet) `chart` renders with `values` arguments.
fn pod_spec(chart: Chart, kind: &str, values: &[String]) -> Value {
    let rendered = template(chart, "r", "storage", values).unwrap_or_else(|e| panic!("{e}"));
    let workload = documents(&rendered).into_iter().find(|d| d["kind"] == kind);
    workload.unwrap_or_else(|| panic!("no {kind}"))["spec"]["template"]["spec"].clone()
}

fn sets(values: &[&str]) -> Vec<String> {
    values.iter().flat_map(|v| ["--set".to_string(), v.to_string()]).collect()
}

/// The controller pods each chart renders, by (chart, label, values): defaults, full values, combined mode.
fn controller_value_sets() -> Vec<(Chart, String, Vec<String>)> {
    let mut sets_ = Vec::new();
    for chart in Chart::ALL {
        for (label, values) in chart.value_sets() {
            sets_.push((chart, label.to_string(), values));
        }
    }
    let every_sidecar = sets(&["snapshotter.enabled=true", "attacher.enabled=true"]);
    sets_.push((Chart::CsiSidecars, "every sidecar".into(), every_sidecar.clone()));
    sets_.push((Chart::CsiSidecars, "combined".into(), [&every_sidecar[..], &sets(&["mode=combined"])].concat()));
    sets_
}

#[test]
fn every_container_of_the_controller_pods_meets_restricted() {
    for (chart, label, values) in controller_value_sets() {
        let pod = pod_spec(chart, "Deployment", &values);
        let containers = every_container(&pod).len();
        let expected = match (chart, label.as_str()) {
            (Chart::SnapshotController, _) => 1,
            (Chart::CsiSidecars, "default values") => 3,
            (Chart::CsiSidecars, "combined") => 2,
            (Chart::CsiSidecars, _) => 5,
        };
        assert_eq!(containers, expected, "{} with {label}: the driver and sidecars", chart.name());
        assert_eq!(restricted_violations(&pod), [], "{} with {label}", chart.name());
    }
}

#[test]
fn with_driver_run_as_root_the_controller_pod_does_not_meet_restricted() {
    // The driver and, to reach its root-owned socket, the sidecars run as root; nothing else is loosened.
    let pod = pod_spec(Chart::CsiSidecars, "Deployment", &sets(&["driver.runAsRoot=true"]));
    let mut expected = Vec::new();
    for rule in ["running as non-root", "running as non-root user"] {
        for container in ["driver", "csi-provisioner", "csi-resizer"] {
            expected.push((rule, container.to_string()));
        }
    }
    assert_eq!(restricted_violations(&pod), expected);
    // A driver that opens its socket to other users: only the driver runs as root.
    let open = sets(&["driver.runAsRoot=true", "socket.reachableByOtherUsers=true"]);
    let pod = pod_spec(Chart::CsiSidecars, "Deployment", &open);
    assert_eq!(
        restricted_violations(&pod),
        [("running as non-root", "driver".to_string()), ("running as non-root user", "driver".to_string())]
    );
}

#[test]
fn the_node_pod_needs_privileged() {
    let pod = pod_spec(Chart::CsiSidecars, "DaemonSet", &sets(&["node.enabled=true"]));
    let rules: std::collections::BTreeSet<&str> = restricted_violations(&pod).into_iter().map(|(r, _)| r).collect();
    // Beyond "baseline" too: a privileged container and hostPath volumes.
    for rule in ["privileged containers", "hostPath volumes"] {
        assert!(rules.contains(rule), "{rule}: {rules:?}");
    }
    // A node release alone renders no controller pod, so the two halves can go to namespaces of different levels.
    let rendered =
        template(Chart::CsiSidecars, "r", "storage", &sets(&["controller.enabled=false", "node.enabled=true"]))
            .unwrap();
    let kinds: Vec<String> = documents(&rendered).iter().map(|d| d["kind"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds, ["ServiceAccount", "DaemonSet"]);
}

/// The pod of `chart`'s Deployment rendered with `values`, created with `--dry-run=server` in `namespace`.
fn dry_run_pod(chart: Chart, namespace: &str, values: &[String]) -> Result<String, String> {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-security"},
        "spec": pod_spec(chart, "Deployment", values),
    });
    dry_run_apply(namespace, &pod.to_string())
}

#[tokio::test]
async fn the_api_server_admits_the_controller_pods_where_restricted_is_enforced() {
    let client = Cluster::shared().client().await;
    let ns = csi_sidecars_e2e::control_plane::namespace::TestNamespace::create(&client, "chart-restricted").await;
    enforce_pod_security(&client, ns.name(), "restricted").await;
    for (chart, label, values) in controller_value_sets() {
        dry_run_pod(chart, ns.name(), &values).unwrap_or_else(|e| panic!("{} with {label}: {e}", chart.name()));
    }
    // kube-apiserver's PodSecurity admission refuses what the rules above find, naming the same settings.
    let refused = dry_run_pod(Chart::CsiSidecars, ns.name(), &sets(&["driver.runAsRoot=true"])).unwrap_err();
    for expected in ["violates PodSecurity \"restricted:latest\"", "runAsNonRoot != true", "runAsUser=0"] {
        assert!(refused.contains(expected), "{expected}: {refused}");
    }
}
