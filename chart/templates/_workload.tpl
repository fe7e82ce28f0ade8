{{/*
The Pod template of one collector, shared by its CronJob and its Deployment (`serve.enabled`) so
that the two never drift: the same container, flags, environment and volumes; the Deployment's
only adds `serve` and its flags before the collector's, the metrics port, the probes, a restart
policy of Always and a grace period (the metrics are kept in memory: the root stays read-only).

Called with (dict "root" $ "collector" "sessions"|"failed-pods" "serve" true|false), and
"prune" true for the collector's archive retention Job (archives-prune.yaml): `archives prune` on
the same store, archives and volume, with neither the collector's database nor a token of the
ServiceAccount (it never calls the API server), and a label of its own (`<collector>-prune`) that
no collector's selector matches.
*/}}
{{- define "gc.podTemplate" -}}
{{- $v := .root.Values -}}
{{- $volume := include "gc.volume" (ternary $v.gc $v.failedPods (eq .collector "sessions")) -}}
{{- $prune := default false .prune -}}
{{- $restore := default false .restore -}}
{{- $own := "" -}}
{{- if $prune }}{{ $own = printf "%s-prune" .collector }}{{ else if $restore }}{{ $own = printf "%s-restore" .collector }}{{ end -}}
{{- /* The request API: the session collector's Deployment only (api.enabled). */ -}}
{{- $api := and .serve (eq .collector "sessions") $v.api.enabled -}}
metadata:
  labels:
    {{- include "gc.labels" .root | nindent 4 }}
    {{- include "gc.collectorLabel" (ternary (dict "collector" $own) . (ne $own "")) | nindent 4 }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ if $restore }}{{ include "gc.fullname" .root }}-restore{{ else }}{{ include "gc.serviceAccountName" .root }}{{ end }}
  automountServiceAccountToken: {{ not $prune }}
  {{- if .serve }}
  restartPolicy: Always
  # On SIGTERM the run in progress stops before its next write and releases its lock.
  terminationGracePeriodSeconds: {{ include "gc.durationCount" (list .root "serve.terminationGracePeriodSeconds") }}
  {{- else }}
  restartPolicy: Never
  {{- end }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: gc
      image: {{ include "gc.image" .root }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args:
        {{- with include "gc.logArgs" .root | trim }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- if $prune }}
        - archives
        - prune
        {{- include "gc.prune.args" . | nindent 8 }}
        {{- else if $restore }}
        - restore
        - sessions
        {{- include "gc.restore.args" . | nindent 8 }}
        {{- else }}
        {{- if .serve }}
        - serve
        - --listen=0.0.0.0:{{ $v.serve.port }}
        - --interval={{ include "gc.durationFlag" (list .root "serve.intervalSeconds") }}
        - --stall={{ include "gc.durationFlag" (list .root "serve.stallSeconds") }}
        {{- if $api }}
        - --api-listen=0.0.0.0:{{ $v.api.port }}
        - --api-tls-cert=/etc/gc/api-tls/tls.crt
        - --api-tls-key=/etc/gc/api-tls/tls.key
        - --api-audience={{ $v.api.audience }}
        - --request-grace={{ $v.api.requestGrace }}
        {{- if and $v.gc.restore $v.gc.restore.enabled }}
        - --api-restore-account={{ include "gc.namespace" .root }}/{{ include "gc.fullname" .root }}-restore
        {{- end }}
        {{- end }}
        {{- else }}
        - run
        {{- end }}
        {{- if eq .collector "sessions" }}
        - sessions
        {{- include "gc.sessions.args" .root | nindent 8 }}
        {{- else }}
        - pods
        {{- include "gc.pods.args" .root | nindent 8 }}
        {{- end }}
        {{- end }}
      env:
        {{- if $prune }}
        {{- include "gc.stateEnv" (ternary $v.gc $v.failedPods (eq .collector "sessions")) | trim | nindent 8 }}
        {{- else if $restore }}
        # The session to restore: the name of the Job (`kubectl create job --from=cronjob/...
        # SESSION`), which the API server puts on the Job's Pods as this label.
        - name: GC_RESTORE_SESSION
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['batch.kubernetes.io/job-name']
        {{- include "gc.stateEnv" $v.gc | trim | nindent 8 }}
        {{- else }}
        {{- with include "gc.alertEnv" .root | trim }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- if eq .collector "sessions" }}
        {{- include "gc.sessions.env" .root | trim | nindent 8 }}
        {{- else }}
        {{- include "gc.pods.env" .root | trim | nindent 8 }}
        {{- end }}
        {{- end }}
      {{- if .serve }}
      ports:
        - name: metrics
          containerPort: {{ $v.serve.port }}
          protocol: TCP
        {{- if $api }}
        - name: api
          containerPort: {{ $v.api.port }}
          protocol: TCP
        {{- end }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: 20
        timeoutSeconds: 5
        failureThreshold: 3
      readinessProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: 10
        timeoutSeconds: 5
      {{- end }}
      {{- if or $volume $api }}
      volumeMounts:
        {{- if $volume }}
        - name: state
          mountPath: /var/lib/gc
        {{- end }}
        {{- if $api }}
        - name: api-tls
          mountPath: /etc/gc/api-tls
          readOnly: true
        {{- end }}
      {{- end }}
      resources:
        {{- toYaml $v.resources | nindent 8 }}
      securityContext:
        {{- toYaml $v.securityContext | nindent 8 }}
  {{- if or $volume $api }}
  volumes:
    {{- if $volume }}
    - name: state
      persistentVolumeClaim:
        claimName: {{ include "gc.stateClaim" . }}
    {{- end }}
    {{- if $api }}
    # The request API's certificate, read again when the Secret is renewed.
    - name: api-tls
      secret:
        secretName: {{ required "api.tlsSecret: name the kubernetes.io/tls Secret the request API serves (tls.crt, tls.key)" $v.api.tlsSecret }}
    {{- end }}
  {{- end }}
{{- end -}}

{{/* `archives prune`'s flags for one collector's receipts and archives (its store and sink come
from the environment, as the collector's do): the window, the volumes' window of the session
collector (gc.retainVolumeDays: the receipt of a claim whose volume it kept stays while the
session can be restored on it), the failed-Pod collector's cluster id, and the collectors'
namespace unless cluster-wide. Called as gc.podTemplate is. */}}
{{- define "gc.prune.args" -}}
{{- $v := .root.Values -}}
- --older-than={{ $v.archives.prune.olderThan }}
{{- include "gc.timeoutArgs" (list .root false) }}
{{- if eq .collector "sessions" }}
- --volume-retention={{ include "gc.durationFlag" (list .root "gc.retainVolumeDays") }}
- --cluster-id={{ include "gc.clusterId" .root }}
{{- else }}
- --cluster-id={{ $v.failedPods.clusterId }}
{{- end }}
{{- if not $v.clusterWide.enabled }}
- --namespace={{ include "gc.namespace" .root }}
{{- end }}
- --dry-run={{ if $v.archives.prune.dryRun }}server{{ else }}none{{ end }}
{{- end -}}

{{/* `restore sessions`' flags for the restore CronJobs (gc-restore-cronjob.yaml): the session
named by the Job (its environment, GC_RESTORE_SESSION, which Kubernetes expands in args), the
release's namespace, the collector's kinds, a dry run for the `-dry-run` one. Called as
gc.podTemplate is, with "dryRun". */}}
{{- define "gc.restore.args" -}}
{{- $v := .root.Values -}}
- --in-cluster
- --namespace={{ include "gc.namespace" .root }}
- --cluster-id={{ include "gc.clusterId" .root }}
- --session=$(GC_RESTORE_SESSION)
{{- include "gc.timeoutArgs" (list .root true) }}
{{- range $v.gc.kinds }}
- --kinds={{ . }}
{{- end }}
{{- if not $v.events.enabled }}
- --no-events
{{- end }}
{{- if .dryRun }}
- --dry-run=server
{{- end }}
{{- end -}}

{{/* The names of the restore CronJobs: `<fullname>-restore` and `<fullname>-restore-dry-run`,
the full name cut to keep them within a CronJob's 52 characters. Called with (dict "root" $
"dryRun" true|false). */}}
{{- define "gc.restoreName" -}}
{{- $suffix := ternary "-restore-dry-run" "-restore" .dryRun -}}
{{- include "gc.fullname" .root | trunc (int (sub 52 (len $suffix))) | trimSuffix "-" }}{{ $suffix }}
{{- end -}}

{{/* The name of a collector's archive retention CronJob: the collector's, then `-prune`, the
full name cut to keep it within a CronJob's 52 characters. Called as gc.podTemplate is. */}}
{{- define "gc.pruneName" -}}
{{- $suffix := printf "-%s-prune" .collector -}}
{{- include "gc.fullname" .root | trunc (int (sub 52 (len $suffix))) | trimSuffix "-" }}{{ $suffix }}
{{- end -}}

{{/* The global flags, before the command: the log's format and level. Nothing at the defaults
(text, warn). */}}
{{- define "gc.logArgs" -}}
{{- if eq .Values.log.format "json" }}
- --log-format=json
{{- end }}
{{- $level := get (dict "error" "-q" "info" "-v" "debug" "-vv" "trace" "-vvv") .Values.log.level }}
{{- with $level }}
- {{ . }}
{{- end }}
{{- end -}}

{{/* The session collector's flags, after `run sessions` or `serve ... sessions`. */}}
{{- define "gc.sessions.args" -}}
- --in-cluster
{{- include "gc.namespaceArgs" . }}
- --cluster-id={{ include "gc.clusterId" . }}
- {{ printf "--selector=%s" .Values.gc.selector | quote }}
- {{ printf "--protect-label=%s" .Values.gc.protectLabel | quote }}
{{- with .Values.gc.excludeSelector }}
- {{ printf "--exclude-selector=%s" . | quote }}
{{- end }}
- --id-label={{ .Values.gc.idLabel }}
- --grace={{ include "gc.durationFlag" (list . "gc.gracePeriod") }}
- --max-deletes={{ .Values.gc.maxDeletes }}
- --volume-retention={{ include "gc.durationFlag" (list . "gc.retainVolumeDays") }}
- --guard-ratio={{ .Values.gc.guard.ratio }}
- --guard-floor={{ .Values.gc.guard.floor }}
{{- if .Values.gc.guard.override }}
- --override-guard
{{- end }}
{{- range .Values.gc.kinds }}
- --kinds={{ . }}
{{- end }}
{{- if and (or .Values.gc.terminalStates .Values.gc.liveStates) (not .Values.database.stateColumn) }}
{{- fail "database.stateColumn: gc.terminalStates and gc.liveStates are read from the state column: name it, or set both to []" }}
{{- end }}
{{- range .Values.gc.liveStates }}
{{- if has . $.Values.gc.terminalStates }}
{{- fail (printf "gc.liveStates: %q is in gc.terminalStates too: a state is live or gone, not both" .) }}
{{- end }}
{{- end }}
{{- range .Values.gc.terminalStates }}
- --terminal-state={{ . }}
{{- end }}
{{- range .Values.gc.liveStates }}
- --live-state={{ . }}
{{- end }}
- --table={{ .Values.database.table }}
- --id-column={{ .Values.database.idColumn }}
- --state-column={{ .Values.database.stateColumn }}
{{- include "gc.sharedArgs" . | nindent 0 }}
{{- /* `run sessions` is a dry run unless told otherwise, as `run pods` is: gc.dryRun=false
(the default) says so. */}}
{{- if .Values.gc.dryRun }}
- --dry-run=server
{{- else }}
- --dry-run=none
{{- end }}
{{- end -}}

{{- define "gc.sessions.env" -}}
- name: DB_HOST
  value: {{ include "gc.databaseHost" . | quote }}
- name: DB_PORT
  value: {{ .Values.database.port | quote }}
- name: DB_NAME
  value: {{ .Values.database.name | quote }}
- name: DB_USER
  value: {{ .Values.database.user | quote }}
- name: DB_SSL_MODE
  value: {{ .Values.database.sslMode | quote }}
- name: DB_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "gc.databaseSecret" . }}
      key: {{ .Values.database.secretKey }}
{{ include "gc.stateEnv" .Values.gc }}
{{- end -}}

{{/* The failed-Pod collector's flags, after `run pods` or `serve ... pods`. */}}
{{- define "gc.pods.args" -}}
{{- $p := .Values.failedPods -}}
- --in-cluster
{{- include "gc.namespaceArgs" . }}
- --cluster-id={{ $p.clusterId }}
- --retention={{ include "gc.durationFlag" (list . "failedPods.retentionSeconds") }}
- --max-pods={{ $p.maxPods }}
- --max-inventory={{ $p.maxInventory }}
- --max-archive-bytes={{ $p.maxArchiveBytes }}
- {{ printf "--protect-label=%s" $p.protectLabel | quote }}
{{- with $p.excludeSelector }}
- {{ printf "--exclude-selector=%s" . | quote }}
{{- end }}
{{- /* Live only when both values allow it (NOTES' LIVE): `run pods` refuses --dry-run=none
without --auto-remediate, and --auto-remediate is idle in a dry run. */}}
{{- if and (not $p.dryRun) $p.autoRemediate }}
- --dry-run=none
- --auto-remediate
{{- else }}
- --dry-run=server
{{- end }}
{{- include "gc.sharedArgs" . | nindent 0 }}
{{- end -}}

{{- define "gc.pods.env" -}}
{{ include "gc.stateEnv" .Values.failedPods }}
{{- end -}}

{{/* Where a collector keeps its receipts (the store) and its archives: the volume by default.
Called with the collector's values. */}}
{{- define "gc.stateEnv" -}}
{{- $archive := .archive -}}
{{- $store := .store -}}
{{- if $store.existingSecret }}
- name: GC_STORE
  valueFrom:
    secretKeyRef:
      name: {{ $store.existingSecret }}
      key: {{ $store.secretKey }}
{{- else }}
- name: GC_STATE_DIR
  value: /var/lib/gc
- name: GC_STORE
  value: sqlite:/var/lib/gc/gc.sqlite3
{{- end }}
{{- if $archive.url }}
- name: GC_ARCHIVE_URL
  value: {{ $archive.url | quote }}
{{- with $archive.endpoint }}
- name: GC_ARCHIVE_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with $archive.region }}
- name: GC_ARCHIVE_REGION
  value: {{ . | quote }}
{{- end }}
{{- with $archive.credentialsSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $archive.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $archive.secretAccessKeyKey }}
{{- end }}
{{- else }}
- name: GC_ARCHIVE_DIR
  value: /var/lib/gc/archives
{{- end }}
{{- end -}}

{{/* Concurrency, metrics, alert and event flags, shared by both collectors. The Pushgateway only when set,
and never to `serve`: Prometheus scrapes its Service, and a push as well would bring every gauge
twice. */}}
{{- define "gc.sharedArgs" -}}
- --concurrency={{ .Values.concurrency }}
{{- include "gc.timeoutArgs" (list . true) }}
- --metrics-prefix={{ .Values.metrics.prefix }}
{{- if and .Values.metrics.pushgateway (not .Values.serve.enabled) }}
- --pushgateway={{ .Values.metrics.pushgateway }}
{{- end }}
{{- if .Values.alerts.onSuccess }}
- --alert-on-success
{{- end }}
{{- if not .Values.events.enabled }}
- --no-events
{{- end }}
{{- end -}}

{{/* `timeouts.*` as flags, each only when set (empty: the flag's default); the API server's only
for commands that call it. Called with (list $ callsTheCluster). */}}
{{- define "gc.timeoutArgs" -}}
{{- $v := (index . 0).Values.timeouts -}}
{{- with $v.store }}
- --store-timeout={{ . }}
{{- end }}
{{- if index . 1 }}
{{- with $v.api }}
- --api-timeout={{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The namespaces a run covers: the collectors' namespace, or in cluster-wide mode every one
the selector matches, less the excluded (and always less the system namespaces). */}}
{{- define "gc.namespaceArgs" -}}
{{- if .Values.clusterWide.enabled }}
- --all-namespaces
{{- with .Values.clusterWide.namespaceSelector }}
- {{ printf "--namespace-selector=%s" . | quote }}
{{- end }}
{{- range .Values.clusterWide.excludeNamespaces }}
- --exclude-namespace={{ . }}
{{- end }}
{{- else }}
- --namespace={{ include "gc.namespace" . }}
{{- end }}
{{- end -}}

{{- define "gc.alertEnv" -}}
{{- with .Values.alerts.webhookSecret }}
- name: GC_ALERT_WEBHOOK
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.alerts.webhookKey }}
- name: GC_ALERT_FORMAT
  value: {{ $.Values.alerts.format | quote }}
{{- end }}
{{- end -}}
