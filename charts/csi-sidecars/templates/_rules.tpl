{{/*
Each sidecar's RBAC rules: upstream's deploy/kubernetes rules, plus only the additions docs/operations.md's "RBAC: what to
add to upstream's role" lists, each behind the value that needs it. Secrets are granted `get` only: every sidecar
reads a Secret with one GET when a call needs it (no Secret cache, as upstream), so upstream's list and watch would
only let a stolen token enumerate them. e2e/rbac/*.yaml holds upstream's rules as data for the e2e suite;
e2e/tests/chart_rules.rs fails when the chart's differ from them by more than that.
Each template takes the root context and renders a YAML list.
*/}}

{{/* kubernetes-csi/external-provisioner deploy/kubernetes/rbac.yaml: ClusterRole external-provisioner-runner */}}
{{- define "csi-sidecars.rules.provisioner.cluster" -}}
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "watch", "create", "update", "patch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["get", "list"]
- apiGroups: ["storage.k8s.io"]
  resources: ["csinodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattachments"]
  verbs: ["get", "list", "watch"]
{{- if .Values.provisioner.rbac.secrets }}
# shipped commented out upstream (get, list): classes that name secrets; read with one GET each, never listed
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- if .Values.provisioner.rbac.referenceGrants }}
# shipped commented out upstream: CrossNamespaceVolumeDataSource
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["referencegrants"]
  verbs: ["get", "list", "watch"]
{{- end }}
# missing upstream although upstream's provisioner makes the same GET: the claim's VolumeAttributesClass
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattributesclasses"]
  verbs: ["get"]
{{- end -}}

{{/* external-provisioner: Role external-provisioner-cfg (Leases, CSIStorageCapacity and its owner chain) */}}
{{- define "csi-sidecars.rules.provisioner.namespaced" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "watch", "list", "delete", "update", "create"]
- apiGroups: ["storage.k8s.io"]
  resources: ["csistoragecapacities"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["get"]
{{- end -}}

{{/* kubernetes-csi/external-resizer deploy/kubernetes/rbac.yaml: ClusterRole external-resizer-runner */}}
{{- define "csi-sidecars.rules.resizer.cluster" -}}
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "watch", "create", "update", "patch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattributesclasses"]
  verbs: ["get", "list", "watch"]
{{- if .Values.resizer.rbac.secrets }}
# shipped commented out upstream (get, list, watch): expand or modify secrets; read with one GET each, never
# listed or watched
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- end -}}

{{- define "csi-sidecars.rules.resizer.namespaced" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "watch", "list", "delete", "update", "create"]
{{- end -}}

{{/* kubernetes-csi/external-snapshotter deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml */}}
{{- define "csi-sidecars.rules.snapshotter.cluster" -}}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "watch", "create", "update", "patch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents/status"]
  verbs: ["update", "patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotcontents"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotcontents/status"]
  verbs: ["update", "patch"]
{{- if .Values.snapshotter.rbac.secrets }}
# shipped commented out upstream (get, list): snapshotter secrets in VolumeSnapshotClasses; read with one GET each
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- end -}}

{{- define "csi-sidecars.rules.snapshotter.namespaced" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "watch", "list", "delete", "update", "create"]
{{- end -}}


{{/* kubernetes-csi/external-attacher deploy/kubernetes/rbac.yaml: ClusterRole external-attacher-runner. No events:
upstream's attacher writes its errors into the VolumeAttachment's status. */}}
{{- define "csi-sidecars.rules.attacher.cluster" -}}
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["csinodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattachments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattachments/status"]
  verbs: ["patch"]
{{- if .Values.attacher.rbac.secrets }}
# shipped commented out upstream (get, list): controller-publish secrets; read with one GET each
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- end -}}

{{/* external-attacher: Role external-attacher-cfg (leader election) */}}
{{- define "csi-sidecars.rules.attacher.namespaced" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "watch", "list", "delete", "update", "create"]
{{- end -}}


{{/* kubernetes-csi/external-health-monitor deploy/kubernetes/external-health-monitor-controller/rbac.yaml:
ClusterRole external-health-monitor-controller-runner. Ours reads no Nodes or Pods (no node watcher); upstream's rules
are kept. No persistentvolumeclaims/status: claims' status.healthStatus is not written, events only. */}}
{{- define "csi-sidecars.rules.health-monitor.cluster" -}}
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["get", "list", "watch", "create", "patch"]
{{- end -}}

{{/* external-health-monitor: Role external-health-monitor-controller-cfg (leader election) */}}
{{- define "csi-sidecars.rules.health-monitor.namespaced" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "watch", "list", "delete", "update", "create"]
{{- end -}}
