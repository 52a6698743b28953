{{/* Names, labels and the shared pieces of every CAESAR pod. */}}

{{- define "caesar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Kept to 40 characters: KubeRay and the Spark operator append suffixes
     (-head-svc, -producer-driver, ...) and names must stay within 63. */}}
{{- define "caesar.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "caesar.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: caesar
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "caesar.selectorLabels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "caesar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "caesar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "caesar.servicesImage" -}}
{{ printf "%s:%s" .Values.image.services.repository .Values.image.services.tag }}
{{- end }}

{{- define "caesar.sparkImage" -}}
{{ printf "%s:%s" .Values.image.sparkJobs.repository .Values.image.sparkJobs.tag }}
{{- end }}

{{- define "caesar.modelConfigMap" -}}
{{- if .Values.model.existingConfigMap }}{{ .Values.model.existingConfigMap }}{{ else }}{{ include "caesar.fullname" . }}-model{{ end }}
{{- end }}

{{- define "caesar.modelKey" -}}
{{- if .Values.model.existingConfigMap }}{{ .Values.model.existingConfigMapKey }}{{ else }}model.caesar{{ end }}
{{- end }}

{{- define "caesar.modelText" -}}
{{- if .Values.model.text }}{{ .Values.model.text }}{{ else }}{{ .Files.Get "files/model.caesar" }}{{ end }}
{{- end }}

{{- define "caesar.modelPath" -}}
{{ printf "%s/model.caesar" (trimSuffix "/" .Values.model.mountPath) }}
{{- end }}

{{- define "caesar.rayHeadService" -}}
{{ include "caesar.fullname" . }}-head-svc
{{- end }}

{{- define "caesar.rayAddress" -}}
{{- if .Values.deploy.rayAddress }}{{ .Values.deploy.rayAddress }}{{ else }}{{ printf "ray://%s.%s.svc:10001" (include "caesar.rayHeadService" .) .Release.Namespace }}{{ end }}
{{- end }}

{{- define "caesar.sparkServiceAccount" -}}
{{- default (printf "%s-spark" (include "caesar.fullname" .)) .Values.spark.serviceAccount.name }}
{{- end }}

{{/* The input topic of an event type: (list $root "EventType") -> topics.inputs[EventType]
     or inputPrefix + EventType, as CAESAR resolves it (src/caesar/settings.py). */}}
{{- define "caesar.inputTopic" -}}
{{- $root := index . 0 }}{{ $event := index . 1 }}
{{- $t := $root.Values.topics }}
{{- if hasKey $t.inputs $event }}{{ get $t.inputs $event }}{{ else }}{{ printf "%s%s" $t.inputPrefix $event }}{{ end }}
{{- end }}

{{- define "caesar.tlsMountPath" -}}/etc/caesar/kafka-tls{{- end }}

{{/* Cross-field rules JSON Schema cannot state; each fails with the value to fix. */}}
{{- define "caesar.validate" -}}
{{- $k := .Values.kafka }}
{{- if and (hasPrefix "SASL" $k.securityProtocol) (not $k.sasl.existingSecret) }}
{{- fail (printf "kafka.securityProtocol is %s: set kafka.sasl.existingSecret to a Secret holding the SASL username and password" $k.securityProtocol) }}
{{- end }}
{{- if and (hasPrefix "SASL" $k.securityProtocol) (not $k.sasl.mechanism) }}
{{- fail (printf "kafka.securityProtocol is %s: set kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)" $k.securityProtocol) }}
{{- end }}
{{- if and $k.sasl.existingSecret (not (hasPrefix "SASL" $k.securityProtocol)) }}
{{- fail (printf "kafka.sasl.existingSecret is set but kafka.securityProtocol is %s: use SASL_SSL or SASL_PLAINTEXT" $k.securityProtocol) }}
{{- end }}
{{- if and $k.tls.existingSecret (not (has $k.securityProtocol (list "SSL" "SASL_SSL"))) }}
{{- fail (printf "kafka.tls.existingSecret is set but kafka.securityProtocol is %s: use SSL or SASL_SSL" $k.securityProtocol) }}
{{- end }}
{{- if and $k.tls.clientCert.enabled (not $k.tls.existingSecret) }}
{{- fail "kafka.tls.clientCert.enabled needs kafka.tls.existingSecret (the Secret with the client certificate and key)" }}
{{- end }}
{{- $w := .Values.ray.workers }}
{{- if gt (int $w.minReplicas) (int $w.maxReplicas) }}
{{- fail (printf "ray.workers.minReplicas (%d) is greater than ray.workers.maxReplicas (%d)" (int $w.minReplicas) (int $w.maxReplicas)) }}
{{- end }}
{{- if and .Values.ray.autoscaling.enabled (or (lt (int $w.replicas) (int $w.minReplicas)) (gt (int $w.replicas) (int $w.maxReplicas))) }}
{{- fail (printf "ray.workers.replicas (%d) must lie between ray.workers.minReplicas (%d) and ray.workers.maxReplicas (%d) when autoscaling is on" (int $w.replicas) (int $w.minReplicas) (int $w.maxReplicas)) }}
{{- end }}
{{- if and .Values.model.text .Values.model.existingConfigMap }}
{{- fail "set model.text or model.existingConfigMap, not both" }}
{{- end }}
{{- end }}

{{/* Kafka, topic and Ray settings as CAESAR_* variables (src/caesar/settings.py:
     nested fields joined by "__"). Secrets stay in their Secret. */}}
{{- define "caesar.env" -}}
{{- $k := .Values.kafka }}
{{- $t := .Values.topics -}}
- name: CAESAR_KAFKA__BOOTSTRAP_SERVERS
  value: {{ $k.bootstrapServers | quote }}
- name: CAESAR_KAFKA__CLIENT_ID
  value: {{ default .Release.Name $k.clientId | quote }}
- name: CAESAR_KAFKA__SECURITY__PROTOCOL
  value: {{ $k.securityProtocol | quote }}
{{- if hasPrefix "SASL" $k.securityProtocol }}
- name: CAESAR_KAFKA__SECURITY__SASL_MECHANISM
  value: {{ $k.sasl.mechanism | quote }}
- name: CAESAR_KAFKA__SECURITY__SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $k.sasl.existingSecret }}
      key: {{ $k.sasl.usernameKey }}
- name: CAESAR_KAFKA__SECURITY__SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $k.sasl.existingSecret }}
      key: {{ $k.sasl.passwordKey }}
{{- end }}
{{- if $k.tls.existingSecret }}
- name: CAESAR_KAFKA__SECURITY__SSL_CA_LOCATION
  value: {{ printf "%s/%s" (include "caesar.tlsMountPath" .) $k.tls.caKey | quote }}
- name: CAESAR_KAFKA__SECURITY__SSL_ENDPOINT_IDENTIFICATION_ALGORITHM
  value: {{ $k.tls.endpointIdentificationAlgorithm | quote }}
{{- if $k.tls.clientCert.enabled }}
- name: CAESAR_KAFKA__SECURITY__SSL_CERTIFICATE_LOCATION
  value: {{ printf "%s/%s" (include "caesar.tlsMountPath" .) $k.tls.clientCert.certKey | quote }}
- name: CAESAR_KAFKA__SECURITY__SSL_KEY_LOCATION
  value: {{ printf "%s/%s" (include "caesar.tlsMountPath" .) $k.tls.clientCert.keyKey | quote }}
{{- end }}
{{- end }}
{{- with $k.schemaRegistry.url }}
- name: CAESAR_KAFKA__SCHEMA_REGISTRY_URL
  value: {{ . | quote }}
{{- end }}
- name: CAESAR_TOPICS__INPUT_PREFIX
  value: {{ $t.inputPrefix | quote }}
- name: CAESAR_TOPICS__INPUTS
  value: {{ $t.inputs | toJson | quote }}
- name: CAESAR_TOPICS__TRANSACTIONS
  value: {{ $t.names.transactions | quote }}
- name: CAESAR_TOPICS__CONTEXT_CHANGES
  value: {{ $t.names.contextChanges | quote }}
- name: CAESAR_TOPICS__PROGRESS
  value: {{ $t.names.progress | quote }}
- name: CAESAR_TOPICS__ALERTS
  value: {{ $t.names.alerts | quote }}
- name: CAESAR_TOPICS__DERIVED
  value: {{ $t.names.derived | quote }}
- name: CAESAR_TOPICS__DEAD_LETTERS
  value: {{ $t.names.deadLetters | quote }}
- name: CAESAR_TOPICS__CHECKPOINTS
  value: {{ $t.names.checkpoints | quote }}
- name: CAESAR_TOPICS__CHANGELOG_PREFIX
  value: {{ $t.names.changelogPrefix | quote }}
- name: CAESAR_TOPICS__PARTITIONS
  value: {{ $t.partitions | quote }}
- name: CAESAR_TOPICS__REPLICATION_FACTOR
  value: {{ $t.replicationFactor | quote }}
- name: CAESAR_TOPICS__PARTITIONS_BY_TOPIC
  value: {{ $t.partitionsByTopic | toJson | quote }}
{{- if not (kindIs "invalid" $t.retentionMs) }}
- name: CAESAR_TOPICS__RETENTION_MS
  value: {{ $t.retentionMs | int64 | quote }}
{{- end }}
- name: CAESAR_RAY__NAMESPACE
  value: {{ .Values.ray.namespace | quote }}
- name: CAESAR_RAY__ACTORS_PER_SERVICE
  value: {{ .Values.ray.actorsPerService | quote }}
{{- with .Values.ray.actors }}
- name: CAESAR_RAY__ACTORS
  value: {{ . | toJson | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volumes every CAESAR pod mounts: the model and, if set, the Kafka TLS Secret. */}}
{{- define "caesar.volumes" -}}
- name: model
  configMap:
    name: {{ include "caesar.modelConfigMap" . }}
    items:
      - key: {{ include "caesar.modelKey" . }}
        path: model.caesar
{{- with .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ . }}
{{- end }}
{{- end }}

{{- define "caesar.volumeMounts" -}}
- name: model
  mountPath: {{ .Values.model.mountPath }}
  readOnly: true
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: {{ include "caesar.tlsMountPath" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The env of a Ray node: CAESAR's, and the services' workers at the
niceness set in values (Ray's default, 15, lets any busy neighbour delay them). */}}
{{- define "caesar.rayEnv" -}}
{{ include "caesar.env" . }}
- name: RAY_worker_niceness
  value: {{ .Values.ray.workerNiceness | quote }}
{{- end }}
