{{/* The release's full name, as Helm charts usually derive it. */}}
{{- define "gc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gc.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{- define "gc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: garbage-collector
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

{{/* The Pod template shared by both collectors: the container is added by the caller. */}}
{{- define "gc.podSpec" -}}
serviceAccountName: {{ include "gc.fullname" . }}
automountServiceAccountToken: true
restartPolicy: Never
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gc.cronJobSpec" -}}
concurrencyPolicy: {{ .Values.concurrencyPolicy }}
successfulJobsHistoryLimit: {{ .Values.successfulJobsHistoryLimit }}
failedJobsHistoryLimit: {{ .Values.failedJobsHistoryLimit }}
startingDeadlineSeconds: {{ .Values.startingDeadlineSeconds }}
{{- end -}}

{{/* Metrics and alert flags and environment, shared by both collectors. */}}
{{- define "gc.metricsArgs" -}}
- --metrics-prefix={{ .Values.metrics.prefix }}
{{- with .Values.metrics.pushgateway }}
- --pushgateway={{ . }}
{{- end }}
{{- if .Values.alerts.onSuccess }}
- --alert-on-success
{{- end }}
{{- end -}}

{{/* The namespaces a run covers: the collectors' namespace, or in cluster-wide mode every one
the selector matches, less the excluded (and always less the system namespaces). */}}
{{- define "gc.namespaceArgs" -}}
{{- if .Values.clusterWide.enabled }}
- --all-namespaces
{{- with .Values.clusterWide.namespaceSelector }}
- --namespace-selector={{ . }}
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
{{- end }}
{{- end -}}
