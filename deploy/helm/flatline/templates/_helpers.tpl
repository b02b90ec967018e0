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
Where the chart mounts what flatline reads from Secrets. Beside
/etc/flatline, not inside it: a mount point inside the read-only ConfigMap
volume would have to be created in it.
*/}}
{{- define "flatline.webConfigDir" -}}/etc/flatline-web{{- end }}
{{- define "flatline.secretsDir" -}}/etc/flatline-secrets{{- end }}

{{/*
flatline.passwords lists the chart's password Secrets: the values key, the
flatline key (dotted), the environment variable and the file name under
flatline.secretsDir. As JSON, since a template returns only text.
*/}}
{{- define "flatline.passwords" -}}
{{- list
  (dict "value" "redisPassword" "key" "redis.password" "env" "FLATLINE_REDIS_PASSWORD" "file" "redis-password")
  (dict "value" "redisSentinelPassword" "key" "redis.sentinel.password" "env" "FLATLINE_REDIS_SENTINEL_PASSWORD" "file" "redis-sentinel-password")
  (dict "value" "kafkaSaslPassword" "key" "kafka.sasl.password" "env" "FLATLINE_KAFKA_SASL_PASSWORD" "file" "kafka-sasl-password")
  | toJson }}
{{- end }}

{{/*
flatline.config is the flatline.yaml the ConfigMap carries, as a dict:
.Values.config with http.addr set to where the probes and the Service reach
it, http.web_config_file to the mounted webConfig Secret and the
*.password_file keys to the mounted password Secrets when the values ask
for them. It refuses what would silently not work: another http.addr, a
key the chart sets that is set here too, and passwords, which belong in
Secrets (see .Values.secrets), not a ConfigMap.
*/}}
{{- define "flatline.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- $http := get $config "http" | default dict }}
{{- $addr := printf "0.0.0.0:%d" (int .Values.httpPort) }}
{{- $set := get $http "addr" }}
{{- if and $set (ne $set $addr) }}
{{- fail (printf "config.http.addr: the chart sets it to %s (from httpPort); got %s" $addr $set) }}
{{- end }}
{{- $_ := set $http "addr" $addr }}
{{- if .Values.webConfig.secretName }}
{{- if get $http "web_config_file" }}
{{- fail "config.http.web_config_file: the chart sets it from webConfig.secretName; set one of them" }}
{{- end }}
{{- $_ := set $http "web_config_file" (printf "%s/%s" (include "flatline.webConfigDir" .) .Values.webConfig.key) }}
{{- end }}
{{- $_ := set $config "http" $http }}
{{- range include "flatline.passwords" . | fromJsonArray }}
{{- $path := splitList "." .key }}
{{- $leaf := last $path }}
{{- $section := $config }}
{{- range initial $path }}
{{- $section = get $section . | default dict }}
{{- end }}
{{- if get $section $leaf }}
{{- fail (printf "config.%s: a ConfigMap is not secret; put the password in a Secret and set secrets.%s.name" .key .value) }}
{{- end }}
{{- $secret := get $.Values.secrets .value }}
{{- if and $secret.name (get $section (printf "%s_file" $leaf)) }}
{{- fail (printf "config.%s_file: secrets.%s.name gives that password too; set one of them" .key .value) }}
{{- end }}
{{- if and $secret.name $.Values.secrets.asFiles }}
{{- /* Walk again, creating the sections a file key needs. */}}
{{- $section = $config }}
{{- range initial $path }}
{{- $next := get $section . | default dict }}
{{- $_ := set $section . $next }}
{{- $section = $next }}
{{- end }}
{{- $_ := set $section (printf "%s_file" $leaf) (printf "%s/%s" (include "flatline.secretsDir" $) .file) }}
{{- end }}
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

{{/*
flatline.passwordSources is the projected volume's sources when the
passwords are files (secrets.asFiles): each named Secret's key as the file
flatline.config points the *.password_file key at.
*/}}
{{- define "flatline.passwordSources" -}}
{{- if .Values.secrets.asFiles }}
{{- range include "flatline.passwords" . | fromJsonArray }}
{{- $secret := get $.Values.secrets .value }}
{{- if $secret.name }}
- secret:
    name: {{ $secret.name }}
    items:
      - key: {{ $secret.key }}
        path: {{ .file }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
flatline.probeRequest is the port, scheme and headers of the kubelet's
probes: HTTPS when the web config serves TLS, and the headers that pass its
basic auth (values.yaml, webConfig).
*/}}
{{- define "flatline.probeRequest" -}}
port: http
{{- if .Values.webConfig.tls }}
scheme: HTTPS
{{- end }}
{{- with .Values.webConfig.probeHeaders }}
httpHeaders:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
flatline.env is the container's environment, as YAML list items: the
passwords (unless they are files), GOMEMLIMIT, then extraEnv.
*/}}
{{- define "flatline.env" -}}
{{- if not .Values.secrets.asFiles }}
{{- range include "flatline.passwords" . | fromJsonArray }}
{{- $secret := get $.Values.secrets .value }}
{{- if $secret.name }}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret.name }}
      key: {{ $secret.key }}
{{- end }}
{{- end }}
{{- end }}
{{- with include "flatline.gomemlimit" . }}
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
flatline.bytes turns a Kubernetes quantity of bytes ("256Mi", "1G",
"268435456", "2.5e+08") into a number of bytes; anything else fails the
render. Sprig parses no quantities.
*/}}
{{- define "flatline.bytes" -}}
{{- $q := toString .value }}
{{- $n := regexFind "^([0-9]+\\.?[0-9]*|\\.[0-9]+)" $q }}
{{- $suffix := trimPrefix $n $q }}
{{- $unit := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- if not $n }}
{{- fail (printf "%s: want a quantity of bytes such as 256Mi, got %q" .key $q) }}
{{- else if hasKey $unit $suffix }}
{{- mulf (float64 $n) (get $unit $suffix) }}
{{- else if regexMatch "^[eE][-+]?[0-9]+$" $suffix }}
{{- float64 $q }}
{{- else }}
{{- fail (printf "%s: want a quantity of bytes such as 256Mi, got %q" .key $q) }}
{{- end }}
{{- end }}

{{/*
flatline.gomemlimit is GOMEMLIMIT in bytes, gomemlimitPercent of the memory
limit (values.yaml says why not all of it); empty without a memory limit,
with gomemlimitPercent 0, or when extraEnv sets GOMEMLIMIT itself.
*/}}
{{- define "flatline.gomemlimit" -}}
{{- $limit := dig "limits" "memory" "" (.Values.resources | default dict) }}
{{- $own := false }}
{{- range .Values.extraEnv }}
{{- if eq .name "GOMEMLIMIT" }}
{{- $own = true }}
{{- end }}
{{- end }}
{{- if and $limit (gt (float64 .Values.gomemlimitPercent) 0.0) (not $own) }}
{{- $bytes := include "flatline.bytes" (dict "key" "resources.limits.memory" "value" $limit) | float64 }}
{{- printf "%.0f" (floor (divf (mulf $bytes (float64 .Values.gomemlimitPercent)) 100)) }}
{{- end }}
{{- end }}
