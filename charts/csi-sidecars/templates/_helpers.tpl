{{/* The release's full name: <release>-csi-sidecars unless the release name already says it. */}}
{{- define "csi-sidecars.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "csi-sidecars.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "csi-sidecars.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "csi-sidecars.serviceAccountName" -}}
{{- default (include "csi-sidecars.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
The sidecars this chart knows, in the order they appear in the pod: values key, binary (= image name), and the
upstream RBAC file their rules come from. A sidecar is deployed when .Values.<key>.enabled.
*/}}
{{- define "csi-sidecars.known" -}}
provisioner: csi-provisioner
resizer: csi-resizer
snapshotter: csi-snapshotter
{{- end -}}

{{/* The image of one binary: dict "root" $ "binary" <name>. */}}
{{- define "csi-sidecars.image" -}}
{{- $tag := default .root.Chart.AppVersion .root.Values.image.tag -}}
{{- if .root.Values.image.registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .root.Values.image.registry) .binary $tag -}}
{{- else -}}
{{- printf "%s:%s" .binary $tag -}}
{{- end -}}
{{- end -}}

{{/* The flags every sidecar gets: dict "root" $ "key" <values key>. */}}
{{- define "csi-sidecars.commonArgs" -}}
{{- $v := .root.Values -}}
{{- $s := index $v .key -}}
- --csi-address=$(ADDRESS)
- --v={{ $v.logLevel }}
- --logging-format={{ $v.loggingFormat }}
- --timeout={{ $s.timeout }}
- --http-endpoint=:{{ $s.httpPort }}
- --leader-election={{ $v.leaderElection.enabled }}
{{- if $v.leaderElection.enabled }}
- --leader-election-namespace=$(NAMESPACE)
- --leader-election-lease-duration={{ $v.leaderElection.leaseDuration }}
- --leader-election-renew-deadline={{ $v.leaderElection.renewDeadline }}
- --leader-election-retry-period={{ $v.leaderElection.retryPeriod }}
{{- end }}
{{- end -}}
