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
attacher: csi-attacher
health-monitor: csi-external-health-monitor-controller
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

{{/* The controller Deployment's pods, and the node DaemonSet's: the selector labels and the component. */}}
{{- define "csi-sidecars.controllerSelectorLabels" -}}
{{ include "csi-sidecars.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "csi-sidecars.nodeSelectorLabels" -}}
{{ include "csi-sidecars.selectorLabels" . }}
app.kubernetes.io/component: node
{{- end -}}

{{/* The node pods' ServiceAccount: no role is bound to it (the registrar and livenessprobe use no API). */}}
{{- define "csi-sidecars.nodeServiceAccountName" -}}
{{- printf "%s-node" (include "csi-sidecars.fullname" .) -}}
{{- end -}}

{{/*
The controller pod's securityContexts, as YAML. The driver's is driver.securityContext; the sidecars' is
securityContext. driver.runAsRoot sets user and group 0 and runAsNonRoot false on the driver's, and on the sidecars'
too unless socket.reachableByOtherUsers (a root driver's socket is only root's).
*/}}
{{- define "csi-sidecars.asRoot" -}}
{{- $context := deepCopy (. | default dict) -}}
{{- $_ := set $context "runAsUser" 0 -}}
{{- $_ := set $context "runAsGroup" 0 -}}
{{- $_ := set $context "runAsNonRoot" false -}}
{{- toYaml $context -}}
{{- end -}}

{{- define "csi-sidecars.driverSecurityContext" -}}
{{- if .Values.driver.runAsRoot -}}
{{- include "csi-sidecars.asRoot" .Values.driver.securityContext -}}
{{- else -}}
{{- toYaml (.Values.driver.securityContext | default dict) -}}
{{- end -}}
{{- end -}}

{{- define "csi-sidecars.sidecarSecurityContext" -}}
{{- if and .Values.driver.runAsRoot (not .Values.socket.reachableByOtherUsers) -}}
{{- include "csi-sidecars.asRoot" .Values.securityContext -}}
{{- else -}}
{{- toYaml (.Values.securityContext | default dict) -}}
{{- end -}}
{{- end -}}

{{/*
A driver and sidecars run as different users cannot talk: connecting to a unix socket needs write permission on it,
and a driver creates its socket with its umask (0755, only its own user may connect; a root driver's socket shuts out
the sidecars' 65532). Rendering fails with the ways out, unless socket.reachableByOtherUsers says the driver opens
its socket to them. The users are the containers' runAsUser, else the pod's; an image's own user is not known here.
*/}}
{{- define "csi-sidecars.checkSocketReach" -}}
{{- $v := .Values -}}
{{- $pod := $v.podSecurityContext | default dict -}}
{{- $driver := include "csi-sidecars.driverSecurityContext" . | fromYaml -}}
{{- $sidecars := include "csi-sidecars.sidecarSecurityContext" . | fromYaml -}}
{{- $driverUser := "" -}}
{{- if hasKey $driver "runAsUser" }}{{ $driverUser = toString $driver.runAsUser }}{{ else if hasKey $pod "runAsUser" }}{{ $driverUser = toString $pod.runAsUser }}{{ end -}}
{{- $sidecarUser := "" -}}
{{- if hasKey $sidecars "runAsUser" }}{{ $sidecarUser = toString $sidecars.runAsUser }}{{ else if hasKey $pod "runAsUser" }}{{ $sidecarUser = toString $pod.runAsUser }}{{ end -}}
{{- if and $driverUser $sidecarUser (ne $driverUser $sidecarUser) (not $v.socket.reachableByOtherUsers) -}}
{{- fail (printf "the driver runs as user %s and the sidecars as user %s: a driver's socket is only writable by its own user (mode 0755 from its umask) and connecting needs write permission, so the sidecars could not reach it. Run the driver as the sidecars' user (driver.securityContext.runAsUser=%s), or both as root (driver.runAsRoot=true), or the sidecars as the driver's (securityContext.runAsUser=%s, with securityContext.runAsNonRoot=false for root, as upstream's manifests do), or set socket.reachableByOtherUsers=true if the driver makes its socket writable for them" $driverUser $sidecarUser $sidecarUser $driverUser) -}}
{{- end -}}
{{- end -}}
