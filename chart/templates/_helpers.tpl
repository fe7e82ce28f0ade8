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

{{/* Whether the PersistentVolume rules (gc-volumes-rbac.yaml, the restore account's) come with
their admission policy (gc-volumes-admission.yaml): "true", or "" with
`gc.volumes.unrestrictedAccess`. Fails on a cluster that cannot enforce it (no
admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy, Kubernetes before 1.30) unless that
value accepts the wider access: PersistentVolumes are cluster-scoped, and RBAC alone grants
`patch` on every one of them. */}}
{{- define "gc.volumesPolicy" -}}
{{- if not (dig "volumes" "unrestrictedAccess" false .Values.gc) -}}
{{- if not (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") -}}
{{- fail "gc.volumes.unrestrictedAccess: this cluster has no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30+), which limits the session collector's patch on PersistentVolumes (cluster-scoped) to the volumes gc keeps and to the fields it writes; without it RBAC grants patch on every PersistentVolume of the cluster. Set gc.volumes.unrestrictedAccess=true to accept that, or gc.enabled=false; with helm template for a 1.30+ cluster, pass --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* A list of strings as a CEL list literal: ['a', 'b']. */}}
{{- define "gc.celList" -}}
[{{ range $i, $s := . }}{{ if $i }}, {{ end }}{{ squote $s }}{{ end }}]
{{- end -}}

{{/* The variables of the volumes' admission policies (gc-volumes-admission.yaml): what the
request changes, maps and policies that may be absent read as empty (`namespace` is a word CEL
reserves: read by index). */}}
{{- define "gc.volumeVariables" -}}
# The volume, as it was, is one the session collector kept: it carries gc's label with the
# collector's cluster id (`--cluster-id`, which the chart leaves at its default, primary).
- name: kept
  expression: "has(oldObject.metadata.labels) && 'gc.example.com/retained' in oldObject.metadata.labels && oldObject.metadata.labels['gc.example.com/retained'] == 'primary'"
# The namespace of the claim the volume was bound to, as it was ('' when none).
- name: claimNamespace
  expression: "has(oldObject.spec.claimRef) && 'namespace' in oldObject.spec.claimRef ? oldObject.spec.claimRef['namespace'] : ''"
- name: policy
  expression: "has(object.spec.persistentVolumeReclaimPolicy) ? object.spec.persistentVolumeReclaimPolicy : ''"
- name: oldPolicy
  expression: "has(oldObject.spec.persistentVolumeReclaimPolicy) ? oldObject.spec.persistentVolumeReclaimPolicy : ''"
- name: labels
  expression: "has(object.metadata.labels) ? object.metadata.labels : {}"
- name: oldLabels
  expression: "has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"
- name: annotations
  expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"
- name: oldAnnotations
  expression: "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"
{{- end -}}

{{/* A validation of the volumes' admission policies: no key of the volume's spec changes, is
added or is removed but `keys`. Called with (dict "keys" (list ...) "who" ... "what" ...). */}}
{{- define "gc.volumeSpecRule" -}}
{{- $keys := include "gc.celList" .keys -}}
- expression: >-
    object.spec.all(k, k in {{ $keys }} || (k in oldObject.spec && object.spec[k] == oldObject.spec[k])) &&
    oldObject.spec.all(k, k in {{ $keys }} || k in object.spec)
  reason: Forbidden
  message: "{{ .who }} changes nothing in a PersistentVolume's spec but {{ .what }}"
{{- end -}}

{{/* The validations of the volumes' admission policies on metadata: no label or annotation but
gc's changes, and the finalizers and owners stay as they were. Called with (dict "label" ...
"who" ...). */}}
{{- define "gc.volumeMetadataRules" -}}
{{- $l := squote .label -}}
- expression: >-
    variables.labels.all(k, k == {{ $l }} || (k in variables.oldLabels && variables.labels[k] == variables.oldLabels[k])) &&
    variables.oldLabels.all(k, k == {{ $l }} || k in variables.labels)
  reason: Forbidden
  message: "{{ .who }} changes no label of a PersistentVolume but gc's own, {{ .label }}"
- expression: >-
    variables.annotations.all(k, k == {{ $l }} || (k in variables.oldAnnotations && variables.annotations[k] == variables.oldAnnotations[k])) &&
    variables.oldAnnotations.all(k, k == {{ $l }} || k in variables.annotations)
  reason: Forbidden
  message: "{{ .who }} changes no annotation of a PersistentVolume but gc's own record, {{ .label }}"
- expression: >-
    (has(object.metadata.finalizers) ? object.metadata.finalizers : []) ==
    (has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : []) &&
    (has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) ==
    (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : [])
  reason: Forbidden
  message: "{{ .who }} changes no finalizer or owner of a PersistentVolume"
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
