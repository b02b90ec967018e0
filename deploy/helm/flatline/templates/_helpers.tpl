{{/* Names and labels, as `helm create` has them. */}}
{{- define "flatline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flatline.fullname" -}}
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

{{- define "flatline.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flatline.labels" -}}
helm.sh/chart: {{ include "flatline.chart" . }}
{{ include "flatline.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "flatline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flatline.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flatline.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flatline.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
flatline.config is the flatline.yaml the ConfigMap carries, as a dict:
.Values.config with http.addr set to where the probes and the Service reach
it. It refuses what would silently not work: another http.addr, and
passwords, which belong in Secrets (see .Values.secrets), not a ConfigMap.
*/}}
{{- define "flatline.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- $addr := printf "0.0.0.0:%d" (int .Values.httpPort) }}
{{- $set := dig "http" "addr" "" $config }}
{{- if and $set (ne $set $addr) }}
{{- fail (printf "config.http.addr: the chart sets it to %s (from httpPort); got %s" $addr $set) }}
{{- end }}
{{- $_ := set $config "http" (dict "addr" $addr) }}
{{- if dig "redis" "password" "" $config }}
{{- fail "config.redis.password: a ConfigMap is not secret; put the password in a Secret and set secrets.redisPassword.name" }}
{{- end }}
{{- if dig "redis" "sentinel" "password" "" $config }}
{{- fail "config.redis.sentinel.password: a ConfigMap is not secret; put the password in a Secret and set secrets.redisSentinelPassword.name" }}
{{- end }}
{{- if dig "kafka" "sasl" "password" "" $config }}
{{- fail "config.kafka.sasl.password: a ConfigMap is not secret; put the password in a Secret and set secrets.kafkaSaslPassword.name" }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/*
flatline.seconds turns a Go duration string ("10s", "1m30s", "1500ms") into
whole seconds, rounded up; anything else fails the render. Sprig parses no
durations, so this sums the unit terms that time.ParseDuration accepts.
*/}}
{{- define "flatline.seconds" -}}
{{- $d := toString .value }}
{{- $total := 0.0 }}
{{- if ne $d "0" }}
{{- $terms := regexFindAll "([0-9]+\\.?[0-9]*|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" $d -1 }}
{{- if or (not $terms) (ne (join "" $terms) $d) }}
{{- fail (printf "%s: want a Go duration such as 10s or 1m30s, got %q" .key $d) }}
{{- end }}
{{- $unit := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "μs" 1e-6 "ms" 1e-3 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- range $terms }}
{{- $n := regexFind "^([0-9]+\\.?[0-9]*|\\.[0-9]+)" . }}
{{- $total = addf $total (mulf (float64 $n) (get $unit (trimPrefix $n .))) }}
{{- end }}
{{- end }}
{{- ceil $total }}
{{- end }}

{{/*
flatline.terminationGracePeriodSeconds is shutdown_timeout (flatline's
default, 10s, when config leaves it out) plus terminationGraceExtraSeconds:
Kubernetes must not SIGKILL an instance still inside its graceful shutdown.
*/}}
{{- define "flatline.terminationGracePeriodSeconds" -}}
{{- if lt (int .Values.terminationGraceExtraSeconds) 1 }}
{{- fail (printf "terminationGraceExtraSeconds: must be at least 1, got %v" .Values.terminationGraceExtraSeconds) }}
{{- end }}
{{- $timeout := dig "shutdown_timeout" "10s" (.Values.config | default dict) }}
{{- $seconds := include "flatline.seconds" (dict "key" "config.shutdown_timeout" "value" $timeout) | int }}
{{- add $seconds (int .Values.terminationGraceExtraSeconds) }}
{{- end }}

{{/*
flatline.affinity is .Values.affinity when set, else the anti-affinity
podAntiAffinity names: instances of this release on different nodes.
*/}}
{{- define "flatline.affinity" -}}
{{- if .Values.affinity }}
{{- toYaml .Values.affinity }}
{{- else if eq .Values.podAntiAffinity "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "flatline.selectorLabels" . | nindent 12 }}
{{- else if eq .Values.podAntiAffinity "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "flatline.selectorLabels" . | nindent 10 }}
{{- end }}
{{- end }}
