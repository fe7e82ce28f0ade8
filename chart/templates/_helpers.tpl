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

{{/* The name of a cluster-scoped object of the release (ClusterRole, ClusterRoleBinding,
ValidatingAdmissionPolicy and its binding): `<fullname>-<namespace><suffix>`, unique to the release
and its namespace. Truncated as Helm charts truncate names (`trunc 63 | trimSuffix "-"`) when
longer than 63 characters, with 8 hex digits of the sha256 of `<namespace>/<fullname>` before the
suffix, so that two releases whose names share their first characters keep names of their own.
Called with (list $ "-suffix"). */}}
{{- define "gc.clusterName" -}}
{{- $root := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $fullname := include "gc.fullname" $root -}}
{{- $namespace := include "gc.namespace" $root -}}
{{- $name := printf "%s-%s%s" $fullname $namespace $suffix -}}
{{- if le (len $name) 63 -}}
{{- $name -}}
{{- else -}}
{{- $hash := printf "%s/%s" $namespace $fullname | sha256sum | trunc 8 -}}
{{- $room := sub 63 (add (len $suffix) 9) | int -}}
{{- $head := printf "%s-%s" $fullname $namespace | trunc $room | trimSuffix "-" -}}
{{- printf "%s-%s%s" $head $hash $suffix | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The session collector's cluster id (`--cluster-id`): `gc.clusterId`, or this install's own,
`<fullname>-<namespace>` (cut to 40 characters with 8 hex digits of the sha256 of
`<namespace>/<fullname>` when longer), so that two installs in one cluster never share one: it is
the value of gc's label on the volumes it keeps, which the admission policies hold each install's
accounts to, and the first part of its archives' keys. */}}
{{- define "gc.clusterId" -}}
{{- if .Values.gc.clusterId -}}
{{- .Values.gc.clusterId -}}
{{- else -}}
{{- $fullname := include "gc.fullname" . -}}
{{- $namespace := include "gc.namespace" . -}}
{{- $id := printf "%s-%s" $fullname $namespace -}}
{{- if le (len $id) 40 -}}
{{- $id -}}
{{- else -}}
{{- $hash := printf "%s/%s" $namespace $fullname | sha256sum | trunc 8 -}}
{{- printf "%s-%s" ($id | trunc 31 | trimSuffix "-") $hash -}}
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
`patch` on every one of them (`gc.volumesPolicyMissing` says when a cluster cannot). */}}
{{- define "gc.volumesPolicy" -}}
{{- if not (dig "volumes" "unrestrictedAccess" false .Values.gc) -}}
{{- with include "gc.volumesPolicyMissing" . -}}
{{- fail (printf "gc.volumes.unrestrictedAccess: this cluster (%s) has no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30+), which limits the session collector's patch on PersistentVolumes (cluster-scoped) to the volumes gc keeps and to the fields it writes; without it RBAC grants patch on every PersistentVolume of the cluster. Set gc.volumes.unrestrictedAccess=true to accept that, or gc.enabled=false" .) -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* Why the cluster cannot enforce the volumes' admission policy (what `gc.volumesPolicy` says),
or "" when it can or may. Decided by what helm knows of the cluster, never by a lookup that is
false when helm knows nothing:
- `helm install` and `upgrade` (and `template --validate`, and tools that pass the cluster's
  kinds as `--api-versions`) list the kinds the cluster serves: admissionregistration.k8s.io/v1
  ValidatingWebhookConfiguration (served since 1.16) without ValidatingAdmissionPolicy means the
  cluster has none.
- the cluster's version, `.Capabilities.KubeVersion` (`--kube-version` for `helm template`),
  when it is 1.21 to 1.29: before 1.30 there is no admissionregistration.k8s.io/v1
  ValidatingAdmissionPolicy. A helm built without its version stamps says v1.20.0 when it knows
  no cluster (`helm template`, `helm lint`), so that version alone proves nothing; a real cluster
  that old is caught by its kinds above.
Otherwise (`helm template` with no cluster) the chart renders for a cluster of 1.30 or later,
the policy included: installing that on a cluster without the kind fails as a whole. */}}
{{- define "gc.volumesPolicyMissing" -}}
{{- $caps := .Capabilities -}}
{{- $group := "admissionregistration.k8s.io/v1" -}}
{{- $kinds := $caps.APIVersions.Has (printf "%s/ValidatingWebhookConfiguration" $group) -}}
{{- $policy := $caps.APIVersions.Has (printf "%s/ValidatingAdmissionPolicy" $group) -}}
{{- $version := $caps.KubeVersion.Version -}}
{{- if and $kinds (not $policy) -}}
Kubernetes {{ $version }}, whose API server serves no such kind
{{- else if and (not $policy) (semverCompare ">=1.21.0-0 <1.30.0-0" $version) -}}
Kubernetes {{ $version }}
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
# The volume, as it was, is one this install's session collector kept: it carries gc's label
# with this install's cluster id (`--cluster-id`, gc.clusterId).
- name: kept
  expression: "has(oldObject.metadata.labels) && 'gc.example.com/retained' in oldObject.metadata.labels && oldObject.metadata.labels['gc.example.com/retained'] == '{{ include "gc.clusterId" . }}'"
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
# gc's label, and gc's record, as they were: both absent, or both there with the same value.
- name: labelKept
  expression: "!('gc.example.com/retained' in variables.labels) && !('gc.example.com/retained' in variables.oldLabels) || 'gc.example.com/retained' in variables.labels && 'gc.example.com/retained' in variables.oldLabels && variables.labels['gc.example.com/retained'] == variables.oldLabels['gc.example.com/retained']"
- name: recordKept
  expression: "!('gc.example.com/retained' in variables.annotations) && !('gc.example.com/retained' in variables.oldAnnotations) || 'gc.example.com/retained' in variables.annotations && 'gc.example.com/retained' in variables.oldAnnotations && variables.annotations['gc.example.com/retained'] == variables.oldAnnotations['gc.example.com/retained']"
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

{{/* The collectors' image. Every workload renders it, so it first checks the values that have
no default (`gc.requiredValues`). */}}
{{- define "gc.image" -}}
{{- include "gc.requiredValues" . -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* Fails the render, naming every value an install must set and has not, each with what it is
and an example, rather than install objects that name what does not exist:
- `image.repository`: no image is published for the chart; the one built from the repository's
  Dockerfile, loaded into the cluster or pushed to a registry. The placeholder of earlier charts
  is refused by name, so that an old values file fails here and not with an ImagePullBackOff.
- with the session collector, `database.host` and `database.existingSecret`: no database or
  Secret of a known name is sure to exist (StreamSpace's own are `<its release>-postgresql` and
  `<its release>-secrets`). */}}
{{- define "gc.requiredValues" -}}
{{- $v := .Values -}}
{{- $missing := list -}}
{{- if not $v.image.repository -}}
{{- $missing = append $missing (printf "image.repository: the gc-cli image the collectors run; %s" (include "gc.imageHow" .)) -}}
{{- else if eq $v.image.repository "ghcr.io/example/gc-cli" -}}
{{- $missing = append $missing (printf "image.repository: %s is a placeholder, no image is published there; %s" $v.image.repository (include "gc.imageHow" .)) -}}
{{- end -}}
{{- if $v.gc.enabled -}}
{{- if not $v.database.host -}}
{{- $missing = append $missing (include "gc.databaseHostHint" .) -}}
{{- end -}}
{{- if not $v.database.existingSecret -}}
{{- $missing = append $missing (include "gc.databaseSecretHint" .) -}}
{{- end -}}
{{- end -}}
{{- if eq (len $missing) 1 -}}
{{- fail (first $missing) -}}
{{- else if $missing -}}
{{- fail (printf "%d values to set: %s" (len $missing) (join "; " $missing)) -}}
{{- end -}}
{{- end -}}

{{- define "gc.imageHow" -}}
build it from the repository's Dockerfile (docker build -t gc-cli:0.1.0 .), load it into the cluster (kind load docker-image gc-cli:0.1.0) or push it to your registry, and set it: --set image.repository=gc-cli --set image.tag=0.1.0 (or REGISTRY/gc-cli)
{{- end -}}

{{- define "gc.databaseHostHint" -}}
database.host: the host of the session database (StreamSpace's PostgreSQL), such as --set database.host=streamspace-postgresql (its Service in the release's namespace) or postgres.db.svc.cluster.local
{{- end -}}

{{- define "gc.databaseSecretHint" -}}
database.existingSecret: the Secret holding the session database's password (under database.secretKey, postgres-password), such as StreamSpace's own (--set database.existingSecret=streamspace-secrets) or one of yours: kubectl -n NAMESPACE create secret generic gc-session-db --from-literal=postgres-password=PASSWORD, then --set database.existingSecret=gc-session-db
{{- end -}}

{{/* The Secret holding the session database's password (required: `gc.requiredValues`). */}}
{{- define "gc.databaseSecret" -}}
{{- required (include "gc.databaseSecretHint" .) .Values.database.existingSecret -}}
{{- end -}}

{{/* The session database's host (required: `gc.requiredValues`). */}}
{{- define "gc.databaseHost" -}}
{{- required (include "gc.databaseHostHint" .) .Values.database.host -}}
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
startingDeadlineSeconds: {{ include "gc.durationCount" (list . "startingDeadlineSeconds") }}
{{- with .Values.timeZone }}
timeZone: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Durations. Each duration value takes a duration as people write it, whole numbers and
units (s, m, h, d, w: `90s`, `15m`, `24h`, `7d`, `1h30m`), as gc-cli reads its duration flags
(humantime), or a bare integer of the value's own unit (its older form, kept for one release:
`gc.gracePeriod: 24` is hours). values.schema.json checks the form and the units each value may
use; these check the range too (a schema cannot compare a string's length with a number). Each
is called with (list $ "gc.gracePeriod"): the root and the value's path. */}}

{{/* A duration value's unit (its bare integer's) and range in that unit: gc-cli's ranges, and
the API server's for the Kubernetes fields. */}}
{{- define "gc.durationSpec" -}}
{{- toJson (get (dict
  "gc.gracePeriod" (list "h" 0 8760 "24h")
  "gc.retainVolumeDays" (list "d" 0 3650 "7d")
  "failedPods.retentionSeconds" (list "s" 1 31536000 "1d")
  "serve.intervalSeconds" (list "s" 60 604800 "6h")
  "serve.stallSeconds" (list "s" 0 604800 "1h")
  "serve.terminationGracePeriodSeconds" (list "s" 30 3600 "2m")
  "prometheusRule.noSuccessHours.sessions" (list "h" 1 8760 "12h")
  "prometheusRule.noSuccessHours.pods" (list "h" 1 8760 "48h")
  "startingDeadlineSeconds" (list "s" 1 31536000 "10m")
  "activeDeadlineSeconds" (list "s" 1 31536000 "30m")) .) -}}
{{- end -}}

{{/* The value at a path of .Values. */}}
{{- define "gc.durationValue" -}}
{{- $value := (index . 0).Values -}}
{{- range splitList "." (index . 1) }}{{ $value = index $value . }}{{ end -}}
{{- if kindIs "string" $value }}{{ $value }}{{ else }}{{ int64 $value }}{{ end -}}
{{- end -}}

{{/* The duration's length in its unit, a whole number within its range; the install fails
naming the value and an example otherwise. */}}
{{- define "gc.durationCount" -}}
{{- $name := index . 1 -}}
{{- $spec := fromJsonArray (include "gc.durationSpec" $name) -}}
{{- $unit := index $spec 0 -}}
{{- $min := int64 (index $spec 1) -}}
{{- $max := int64 (index $spec 2) -}}
{{- $value := include "gc.durationValue" . -}}
{{- $units := dict "s" 1 "m" 60 "h" 3600 "d" 86400 "w" 604800 -}}
{{- $per := int64 (index $units $unit) -}}
{{- $example := index $spec 3 -}}
{{- $seconds := int64 0 -}}
{{- if regexMatch "^[0-9]+$" $value -}}
{{- $seconds = mul (int64 $value) $per -}}
{{- else if regexMatch "^([0-9]{1,9}[smhdw])+$" $value -}}
{{- range regexFindAll "[0-9]+[smhdw]" $value -1 -}}
{{- $seconds = add $seconds (mul (int64 (regexFind "[0-9]+" .)) (index $units (regexFind "[smhdw]" .))) -}}
{{- end -}}
{{- else -}}
{{- fail (printf "%s: %q is not a duration: give whole numbers and units (s, m, h, d, w), such as %s" $name $value $example) -}}
{{- end -}}
{{- if ne (mod $seconds $per) (int64 0) -}}
{{- fail (printf "%s: %s is not a whole number of %s: give one such as %s" $name $value (get (dict "s" "seconds" "h" "hours" "d" "days") $unit) $example) -}}
{{- end -}}
{{- $count := div $seconds $per -}}
{{- if or (lt $count $min) (gt $count $max) -}}
{{- fail (printf "%s: %s is outside %d%s..%d%s: give one such as %s" $name $value $min $unit $max $unit $example) -}}
{{- end -}}
{{- $count -}}
{{- end -}}

{{/* The duration as a gc-cli flag takes it: a string as written, a bare integer with its unit
made explicit (`gc.gracePeriod: 24`: `24h`); checked as gc.durationCount checks it. Also how
NOTES shows it. */}}
{{- define "gc.durationFlag" -}}
{{- $count := include "gc.durationCount" . -}}
{{- $value := include "gc.durationValue" . -}}
{{- if regexMatch "^[0-9]+$" $value -}}
{{- $count }}{{ index (fromJsonArray (include "gc.durationSpec" (index . 1))) 0 -}}
{{- else -}}
{{- $value -}}
{{- end -}}
{{- end -}}
