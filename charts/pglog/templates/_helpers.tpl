{{/* Chart name, overridable. */}}
{{- define "pglog.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of cluster-wide and release objects: the release name, or release-chart when the
release name does not contain the chart name.
*/}}
{{- define "pglog.fullname" -}}
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

{{- define "pglog.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the release. */}}
{{- define "pglog.labels" -}}
helm.sh/chart: {{ include "pglog.chart" . }}
app.kubernetes.io/name: {{ include "pglog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pglog
{{- end }}

{{/* The operator's pods (selector: stable across upgrades). */}}
{{- define "pglog.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pglog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The collector pods of every pool: what operator/src/desired/pool-resources.ts puts on them. */}}
{{- define "pglog.collector.selectorLabels" -}}
app.kubernetes.io/name: pglog
app.kubernetes.io/component: collector
{{- end }}

{{- define "pglog.operator.serviceAccountName" -}}
{{- .Values.serviceAccount.operator.name }}
{{- end }}

{{- define "pglog.collector.serviceAccountName" -}}
{{- .Values.serviceAccount.collector.name }}
{{- end }}

{{/* The image of the operator, and of pools that name none. */}}
{{- define "pglog.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Namespaces where collector pools run: collectorNamespaces, or the release namespace. */}}
{{- define "pglog.collectorNamespaces" -}}
{{- if .Values.collectorNamespaces }}
{{- toJson (uniq .Values.collectorNamespaces) }}
{{- else }}
{{- toJson (list .Release.Namespace) }}
{{- end }}
{{- end }}

{{/* Namespace of the default pool. */}}
{{- define "pglog.pool.namespace" -}}
{{- default .Release.Namespace .Values.pool.namespace }}
{{- end }}
