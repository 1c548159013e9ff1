{{/* The chart's name, or nameOverride. */}}
{{- define "cgaudit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of everything the release makes: fullnameOverride, else the
release's name, with the chart's name when it does not already hold it. */}}
{{- define "cgaudit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "cgaudit.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* `remediate` as the agent takes it: an unquoted on/off in a values
file is a YAML boolean, taken as "on"/"off". */}}
{{- define "cgaudit.remediate" -}}
{{- if kindIs "bool" .Values.remediate -}}
{{- ternary "on" "off" .Values.remediate -}}
{{- else -}}
{{- .Values.remediate -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: stable across upgrades. */}}
{{- define "cgaudit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cgaudit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cgaudit.labels" -}}
{{ include "cgaudit.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image, by digest when one is given. */}}
{{- define "cgaudit.image" -}}
{{- $repo := required "image.repository is required: there is no public image. Build and push one with `cargo xtask image --push REGISTRY/cgaudit`, then install with --set image.repository=REGISTRY/cgaudit" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The AppArmor profile: the user's, else Unconfined for remediation (mount(2)), else RuntimeDefault. */}}
{{- define "cgaudit.appArmorProfile" -}}
{{- if .Values.appArmorProfile -}}
{{- toYaml .Values.appArmorProfile -}}
{{- else if eq (include "cgaudit.remediate" .) "on" -}}
type: Unconfined
{{- else -}}
type: RuntimeDefault
{{- end -}}
{{- end -}}

{{/* Kubernetes 1.30 and later take AppArmor as a securityContext field; earlier, as an annotation. */}}
{{- define "cgaudit.appArmorField" -}}
{{- semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version -}}
{{- end -}}

{{/* The annotation's value for a profile (before Kubernetes 1.30). */}}
{{- define "cgaudit.appArmorAnnotation" -}}
{{- $p := include "cgaudit.appArmorProfile" . | fromYaml -}}
{{- if eq $p.type "Unconfined" -}}unconfined
{{- else if eq $p.type "Localhost" -}}{{ printf "localhost/%s" $p.localhostProfile }}
{{- else -}}runtime/default
{{- end -}}
{{- end -}}
