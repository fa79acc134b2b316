//! A driver deployed the way upstream's csi-driver-host-path deploys its own (deploy/kubernetes-*/hostpath/
//! csi-hostpath-plugin.yaml), with only the images swapped for ours: what a driver author who changes one `image:`
//! line per sidecar runs.

use crate::node::pods::image;

/// Upstream's csi-hostpath-plugin.yaml and its CSIDriver, trimmed to
/// the sidecars we ship a drop-in for, each image swapped for ours: one StatefulSet pod running hostpath-plugin as
/// root and privileged (controller and node in one process, its state in the host directory `state`; the kubelet
/// restarts it when livenessprobe's /healthz fails) beside node-driver-registrar, livenessprobe, csi-provisioner,
/// csi-resizer and csi-snapshotter, the sidecars with upstream's flags (Go spelling included) and no
/// securityContext. `provisioner_security` is extra YAML for the provisioner container (empty: none, as upstream's).
/// `attach_required`: upstream's csi-attacher too, the CSIDriver's `attachRequired: true` (upstream's own setting)
/// and hostpath-plugin's `--attach-required`; without it, no attacher and `attachRequired: false`.
pub fn hostpath_manifests(driver: &str, state: &str, provisioner_security: &str, attach_required: bool) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let plugin_dir = format!("/var/lib/kubelet/plugins/{driver}");
    let (plugin_flag, attacher) = match attach_required {
        true => (
            ", --attach-required",
            format!(
                "\n        - name: csi-attacher\n          image: {}\n          imagePullPolicy: Never\n          \
                 args: [--v=5, --csi-address=/csi/csi.sock]\n          volumeMounts:\n            \
                 - {{mountPath: /csi, name: socket-dir}}",
                image("csi-attacher")
            ),
        ),
        false => ("", String::new()),
    };
    format!(
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: csi-hostpathplugin
spec:
  serviceName: csi-hostpathplugin
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: csi-hostpathplugin}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: csi-hostpathplugin}}
    spec:
      serviceAccountName: csi-hostpathplugin-sa
      terminationGracePeriodSeconds: 2
      containers:
        - name: hostpath
          image: hostpath-plugin:{version}
          imagePullPolicy: Never
          args: [--drivername={driver}, --v=5, --endpoint=$(CSI_ENDPOINT), --nodeid=$(KUBE_NODE_NAME),
            --statedir=/csi-data-dir, --node-mounts{plugin_flag}]
          env:
            - {{name: CSI_ENDPOINT, value: "unix:///csi/csi.sock"}}
            - name: KUBE_NODE_NAME
              valueFrom: {{fieldRef: {{apiVersion: v1, fieldPath: spec.nodeName}}}}
          securityContext:
            privileged: true
          ports:
            - {{containerPort: 9898, name: healthz, protocol: TCP}}
          livenessProbe:
            failureThreshold: 5
            httpGet: {{path: /healthz, port: healthz}}
            initialDelaySeconds: 10
            timeoutSeconds: 3
            periodSeconds: 2
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
            - {{mountPath: /var/lib/kubelet/pods, mountPropagation: Bidirectional, name: mountpoint-dir}}
            - {{mountPath: /var/lib/kubelet/plugins, mountPropagation: Bidirectional, name: plugins-dir}}
            - {{mountPath: /csi-data-dir, name: csi-data-dir}}
            - {{mountPath: /dev, name: dev-dir}}
        - name: node-driver-registrar
          image: {registrar}
          imagePullPolicy: Never
          args: [--v=5, --csi-address=/csi/csi.sock, --kubelet-registration-path={plugin_dir}/csi.sock]
          env:
            - name: KUBE_NODE_NAME
              valueFrom: {{fieldRef: {{apiVersion: v1, fieldPath: spec.nodeName}}}}
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
            - {{mountPath: /registration, name: registration-dir}}
        - name: liveness-probe
          image: {livenessprobe}
          imagePullPolicy: Never
          args: [--csi-address=/csi/csi.sock, --health-port=9898]
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
        - name: csi-provisioner
          image: {provisioner}
          imagePullPolicy: Never
          args: [-v=5, --csi-address=/csi/csi.sock, --feature-gates=Topology=true]{provisioner_security}
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
        - name: csi-resizer
          image: {resizer}
          imagePullPolicy: Never
          args: [-v=5, -csi-address=/csi/csi.sock]
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
        - name: csi-snapshotter
          image: {snapshotter}
          imagePullPolicy: Never
          args: [-v=5, --csi-address=/csi/csi.sock]
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}{attacher}
      volumes:
        - {{name: socket-dir, hostPath: {{path: {plugin_dir}, type: DirectoryOrCreate}}}}
        - {{name: mountpoint-dir, hostPath: {{path: /var/lib/kubelet/pods, type: DirectoryOrCreate}}}}
        - {{name: registration-dir, hostPath: {{path: /var/lib/kubelet/plugins_registry, type: Directory}}}}
        - {{name: plugins-dir, hostPath: {{path: /var/lib/kubelet/plugins, type: Directory}}}}
        - {{name: csi-data-dir, hostPath: {{path: {state}, type: DirectoryOrCreate}}}}
        - {{name: dev-dir, hostPath: {{path: /dev, type: Directory}}}}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: {driver}
spec:
  attachRequired: {attach_required}
  podInfoOnMount: true
  volumeLifecycleModes: [Persistent]
  fsGroupPolicy: File
"#,
        registrar = image("csi-node-driver-registrar"),
        livenessprobe = image("livenessprobe"),
        provisioner = image("csi-provisioner"),
        resizer = image("csi-resizer"),
        snapshotter = image("csi-snapshotter"),
    )
}
