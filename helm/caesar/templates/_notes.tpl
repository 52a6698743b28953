{{/* The text of NOTES.txt, a named template so tests can render it without a cluster. */}}
{{- define "caesar.notes" -}}
CAESAR {{ .Chart.AppVersion }} is installed as release "{{ .Release.Name }}" in namespace "{{ .Release.Namespace }}".

Kafka: {{ .Values.kafka.bootstrapServers }} ({{ .Values.kafka.securityProtocol }}{{ if .Values.kafka.schemaRegistry.url }}, schema registry {{ .Values.kafka.schemaRegistry.url }}{{ else }}, Avro single-object encoding{{ end }})

PUBLISH your events to these input topics (Avro, record key = the model's
PARTITION BY fields, e.g. "<xway>:<dir>"):
{{- range $event, $topic := .Values.topics.inputs }}
  {{ $topic }}    <- {{ $event }} events
{{- end }}
{{- if not (or .Values.model.text .Values.model.existingConfigMap (hasKey .Values.topics.inputs "PositionReport")) }}
  {{ .Values.topics.inputPrefix }}PositionReport    <- PositionReport events (the chart's example model)
{{- end }}
  {{ .Values.topics.inputPrefix }}<EventType>    <- any {{ if .Values.topics.inputs }}other {{ end }}EVENT the model declares

CONSUME results from:
  {{ .Values.topics.names.alerts }}    alerts (the model's DERIVE outputs meant for you)
  {{ .Values.topics.names.derived }}    all derived events
  {{ .Values.topics.names.deadLetters }}    rejected events, each with the reason

Internal topics (do not write to them): {{ .Values.topics.names.transactions }},
{{ .Values.topics.names.contextChanges }}, {{ .Values.topics.names.progress }}, {{ .Values.topics.names.checkpoints }}, {{ .Values.topics.names.changelogPrefix }}*
{{- if .Values.topics.create }}
The job {{ include "caesar.fullname" . }}-topics created the missing ones ({{ .Values.topics.partitions }} partitions, replication factor {{ .Values.topics.replicationFactor }}).
{{- else }}
topics.create is false: create these topics yourself (or let the services create them).
{{- end }}

Model: {{ include "caesar.modelPath" . }} from ConfigMap {{ include "caesar.modelConfigMap" . }}, run on the Ray cluster
{{ include "caesar.fullname" . }} by the driver deployment/{{ include "caesar.fullname" . }}-driver ({{ include "caesar.rayAddress" . }}).

  kubectl -n {{ .Release.Namespace }} get raycluster {{ include "caesar.fullname" . }}
  kubectl -n {{ .Release.Namespace }} logs deployment/{{ include "caesar.fullname" . }}-driver   # service stats
  kubectl -n {{ .Release.Namespace }} port-forward svc/{{ include "caesar.rayHeadService" . }} 8265   # Ray dashboard
{{- if .Values.spark.enabled }}

Spark jobs (Spark operator):
{{- range $key, $job := .Values.spark.jobs }}
{{- if $job.enabled }}
  {{ include "caesar.fullname" $ }}-{{ $key | kebabcase }}: {{ if $job.command }}caesar spark {{ $job.command }} {{ include "caesar.modelPath" $ }}{{ else }}python -m {{ $job.module }}{{ end }}
{{- end }}
{{- end }}
  kubectl -n {{ .Release.Namespace }} get sparkapplications
{{- end }}

Upgrade the model:  helm upgrade {{ .Release.Name }} <chart> --reuse-values --set-file model.text=new-model.caesar
{{- if .Values.model.existingConfigMap }}
(after changing ConfigMap {{ .Values.model.existingConfigMap }} yourself: kubectl -n {{ .Release.Namespace }} rollout restart deployment/{{ include "caesar.fullname" . }}-driver)
{{- end }}
{{- end }}
