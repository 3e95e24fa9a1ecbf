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

{{/*
Entries of --allowed-images (JSON list): operator.allowedImages, or image.repository. Each must
name its registry host, as the operator requires: a host-less one would leave the registry to
the container runtime's default or short-name search. Stops the render otherwise.
*/}}
{{- define "pglog.allowedImages" -}}
{{- $entries := default (list .Values.image.repository) .Values.operator.allowedImages }}
{{- range $entries }}
{{- $first := first (splitList "/" .) }}
{{- if or (not (contains "/" .)) (not (or (contains "." $first) (contains ":" $first) (eq $first "localhost"))) }}
{{- fail (printf "operator.allowedImages (or image.repository) entry %s names no registry host: write it as pulled, e.g. docker.io/library/pglog or ghcr.io/pglog/pglog" .) }}
{{- end }}
{{- end }}
{{- toJson $entries }}
{{- end }}

{{/*
Entries of --allowed-store-secrets (JSON list): operator.allowedStoreSecrets, or the chart
pool's Secret. The chart's own pool must be allowed: stops the render otherwise.
*/}}
{{- define "pglog.allowedStoreSecrets" -}}
{{- $entries := default (list .Values.pool.store.secretName) .Values.operator.allowedStoreSecrets }}
{{- if and .Values.pool.enabled (not (has .Values.pool.store.secretName $entries)) (not (has (printf "%s/%s" (include "pglog.pool.namespace" .) .Values.pool.store.secretName) $entries)) }}
{{- fail (printf "pool.store.secretName %s is not in operator.allowedStoreSecrets: the chart's own pool would be refused" .Values.pool.store.secretName) }}
{{- end }}
{{- toJson $entries }}
{{- end }}

{{/*
The image reference grammar the operator parses (operator/src/desired/image-reference.ts), with
a registry host: RE2 for the admission policy's CEL, which has no parser of its own.
*/}}
{{- define "pglog.imageReferencePattern" -}}
{{- $label := `[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?` }}
{{- $path := `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*` }}
{{- printf `^(?:%s(?:\.%s)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?(?:/%s)+(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$` $label $label $path }}
{{- end }}

{{/*
One RE2 pattern per --allowed-images entry (JSON list), admitting what imageAllowed
(operator/src/desired/image-allow-list.ts) admits of a reference that passed the grammar:
a repository with any tag or digest; a prefix's repositories; a tag pattern's tags (`*`: any
run of tag characters; no tag counts as latest) without a digest; a digest, with or without a tag.
*/}}
{{- define "pglog.allowedImagePatterns" -}}
{{- $path := `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*` }}
{{- $tag := `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}` }}
{{- $digest := `sha256:[0-9a-f]{64}` }}
{{- $patterns := list }}
{{- range include "pglog.allowedImages" . | fromJsonArray }}
{{- if hasSuffix "/" . }}
{{- $patterns = append $patterns (printf `^%s%s(?:/%s)*(?::%s)?(?:@%s)?$` (regexQuoteMeta .) $path $path $tag $digest) }}
{{- else if contains "@" . }}
{{- $parts := splitn "@" 2 . }}
{{- $patterns = append $patterns (printf `^%s(?::%s)?@%s$` (regexQuoteMeta $parts._0) $tag (regexQuoteMeta $parts._1)) }}
{{- else if regexMatch `^.+:[^:/]+$` . }}
{{- $name := regexReplaceAll `^(.+):[^:/]+$` . "${1}" }}
{{- $tags := regexQuoteMeta (regexReplaceAll `^.+:([^:/]+)$` . "${1}") | replace `\*` `[A-Za-z0-9_.-]*` }}
{{- $latest := regexMatch (printf `^%s$` $tags) "latest" }}
{{- $patterns = append $patterns (printf `^%s(?::%s)%s$` (regexQuoteMeta $name) $tags (ternary "?" "" $latest)) }}
{{- else }}
{{- $patterns = append $patterns (printf `^%s(?::%s)?(?:@%s)?$` (regexQuoteMeta .) $tag $digest) }}
{{- end }}
{{- end }}
{{- toJson $patterns }}
{{- end }}
