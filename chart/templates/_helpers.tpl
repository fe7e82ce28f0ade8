{{/* The chart's name, or `nameOverride`. */}}
{{- define "gc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, as Helm charts usually derive it: `fullnameOverride`, or the release
name, followed by the chart's name unless the release name holds it. At most 40 characters, so
that `<fullname>-failed-pods` fits a CronJob's 52 and its Jobs' and Services' names fit too. */}}
{{- define "gc.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gc.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{- define "gc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: garbage-collector
{{- end -}}

{{/* The labels that pick one collector's Pods (the Deployment's selector, its Service's, its
ServiceMonitor's). Called with (dict "root" $ "collector" "sessions"|"failed-pods"). */}}
{{- define "gc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gc.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{ include "gc.collectorLabel" . }}
{{- end -}}

{{/* The one label `gc.labels` lacks for `gc.selectorLabels`. */}}
{{- define "gc.collectorLabel" -}}
gc.example.com/collector: {{ .collector }}
{{- end -}}

{{/* The ServiceAccount the collectors run as: the chart's own, or an existing one. */}}
{{- define "gc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the existing ServiceAccount to run as, when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The run locks of the rendered collectors, the Leases `gc-cli` names (gc-k8s
`rbac::SESSIONS_LEASE`, `rbac::PODS_LEASE`), comma separated for a flow sequence. */}}
{{- define "gc.leaseNames" -}}
{{- $names := list -}}
{{- if .Values.gc.enabled }}{{ $names = append $names "gc-sessions" }}{{ end -}}
{{- if .Values.failedPods.enabled }}{{ $names = append $names "gc-pods" }}{{ end -}}
{{- join ", " $names -}}
{{- end -}}

{{/* The namespaces the collectors never act in (gc-core's scope rule), which the admission
policy closes to the chart's ServiceAccount. */}}
{{- define "gc.systemNamespaces" -}}
kube-system, kube-public, kube-node-lease
{{- end -}}

{{/* Fails the install when the collectors' namespace (`namespace`, or the release namespace) is
a system namespace: the collectors refuse to run there, and their Role would be granted there. */}}
{{- define "gc.notSystemNamespace" -}}
{{- $ns := include "gc.namespace" . -}}
{{- if has $ns (splitList ", " (include "gc.systemNamespaces" .)) -}}
{{- fail (printf "namespace %s is a system namespace: the collectors never run there; install the chart in another namespace (--namespace, or the value `namespace`)" $ns) -}}
{{- end -}}
{{- end -}}

{{/* The username the API server gives the collectors' ServiceAccount. */}}
{{- define "gc.serviceAccountUser" -}}
system:serviceaccount:{{ include "gc.namespace" . }}:{{ include "gc.serviceAccountName" . }}
{{- end -}}

{{- define "gc.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* StreamSpace's secret is `<streamspace fullname>-secrets`; as its subchart, our release is its release. */}}
{{- define "gc.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else if contains "streamspace" .Release.Name -}}
{{- printf "%s-secrets" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-streamspace-secrets" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gc.databaseHost" -}}
{{- default (printf "%s-postgresql" .Release.Name) .Values.database.host -}}
{{- end -}}

{{/* The failed-Pod collector's volume holds what neither the object store nor PostgreSQL holds:
"true" or "". */}}
{{/* Whether a collector keeps its state on a volume of its own: unless both its archives and
its store are elsewhere. Called with the collector's values (`.Values.gc`, `.Values.failedPods`). */}}
{{- define "gc.volume" -}}
{{- if not (and .archive.url .store.existingSecret) -}}
true
{{- end -}}
{{- end -}}

{{/* The claim of a collector's state volume. Called with (dict "root" $ "collector" ...). */}}
{{- define "gc.stateClaim" -}}
{{ include "gc.fullname" .root }}-{{ ternary "sessions-state" "state" (eq .collector "sessions") }}
{{- end -}}

{{- define "gc.cronJobSpec" -}}
concurrencyPolicy: {{ .Values.concurrencyPolicy }}
successfulJobsHistoryLimit: {{ .Values.successfulJobsHistoryLimit }}
failedJobsHistoryLimit: {{ .Values.failedJobsHistoryLimit }}
startingDeadlineSeconds: {{ .Values.startingDeadlineSeconds }}
{{- with .Values.timeZone }}
timeZone: {{ . | quote }}
{{- end }}
{{- end -}}
