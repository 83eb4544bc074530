{{/* The chart's name, or nameOverride. */}}
{{- define "eaddr.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: fullnameOverride, else the release's name when it holds the chart's (so
`helm install eaddr` names them eaddr, as deploy/ does), else RELEASE-eaddr.
*/}}
{{- define "eaddr.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The namespace of the ServiceAccount and the DaemonSet. */}}
{{- define "eaddr.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name }}
{{- end }}

{{/* helm.sh/chart's value. */}}
{{- define "eaddr.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: app, as in deploy/ (`kubectl -n eaddr logs -l app=eaddr`). A DaemonSet's
selector cannot change after it is made, so this stays what deploy/base has.
*/}}
{{- define "eaddr.selectorLabels" -}}
app: {{ include "eaddr.fullname" . }}
{{- end }}

{{/* Helm's standard labels (https://helm.sh/docs/chart_best_practices/labels/). */}}
{{- define "eaddr.standardLabels" -}}
helm.sh/chart: {{ include "eaddr.chart" . }}
app.kubernetes.io/name: {{ include "eaddr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "eaddr.tag" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels of the Namespace, ServiceAccount and DaemonSet, and of its pods. */}}
{{- define "eaddr.labels" -}}
{{ include "eaddr.selectorLabels" . }}
{{ include "eaddr.standardLabels" . }}
{{- end }}

{{/* The image's tag: image.tag, else the chart's appVersion. */}}
{{- define "eaddr.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}
