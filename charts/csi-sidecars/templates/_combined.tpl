{{/*
mode: combined — one csi-sidecars container for every enabled sidecar. The process's flags once; each sidecar's
timeout, gates and extraArgs with its prefix (--resizer.timeout=10s), so they stay that sidecar's.
*/}}
{{- define "csi-sidecars.enabledKeys" -}}
{{- $v := .Values -}}
{{- $keys := list -}}
{{- range $key, $binary := include "csi-sidecars.known" . | fromYaml -}}
{{- if (index $v $key).enabled -}}
{{- $keys = append $keys $key -}}
{{- end -}}
{{- end -}}
{{- join "," $keys -}}
{{- end -}}

{{- define "csi-sidecars.combinedContainer" -}}
{{- $root := . -}}
{{- $v := .Values -}}
- name: csi-sidecars
  image: {{ include "csi-sidecars.image" (dict "root" $root "binary" "csi-sidecars") | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args:
    - --sidecars={{ include "csi-sidecars.enabledKeys" . }}
    - --csi-address=$(ADDRESS)
    - --v={{ $v.logLevel }}
    - --logging-format={{ $v.loggingFormat }}
    - --http-endpoint=:{{ $v.combined.httpPort }}
    - --leader-election={{ $v.leaderElection.enabled }}
    {{- if $v.leaderElection.enabled }}
    - --leader-election-namespace=$(NAMESPACE)
    - --leader-election-lease-duration={{ $v.leaderElection.leaseDuration }}
    - --leader-election-renew-deadline={{ $v.leaderElection.renewDeadline }}
    - --leader-election-retry-period={{ $v.leaderElection.retryPeriod }}
    - --leader-election-shared={{ $v.combined.leaderElectionShared }}
    {{- end }}
    {{- range $key, $binary := include "csi-sidecars.known" . | fromYaml }}
    {{- $s := index $v $key }}
    {{- if $s.enabled }}
    - --{{ $key }}.timeout={{ $s.timeout }}
    {{- if and (eq $key "snapshotter") (not $s.groupSnapshots) }}
    - --snapshotter.feature-gates=CSIVolumeGroupSnapshot=false
    {{- end }}
    {{- range $s.extraArgs }}
    - {{ regexReplaceAll "^--?" . (printf "--%s." $key) | quote }}
    {{- end }}
    {{- end }}
    {{- end }}
    {{- with $v.combined.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  env:
    - name: ADDRESS
      value: "{{ $v.socket.dir }}/{{ $v.socket.file }}"
    - name: NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: NODE_NAME
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
  ports:
    - name: sidecars
      containerPort: {{ $v.combined.httpPort }}
      protocol: TCP
  {{- $health := ternary "/healthz/leader-election" "/healthz" $v.leaderElection.enabled }}
  livenessProbe:
    httpGet:
      path: {{ $health }}
      port: sidecars
    initialDelaySeconds: 10
    periodSeconds: 20
    timeoutSeconds: 10
    failureThreshold: 1
  readinessProbe:
    httpGet:
      path: {{ $health }}
      port: sidecars
    periodSeconds: 10
    timeoutSeconds: 5
  securityContext:
    {{- include "csi-sidecars.sidecarSecurityContext" . | nindent 4 }}
  {{- with $v.combined.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: socket-dir
      mountPath: {{ $v.socket.dir }}
{{- end -}}
