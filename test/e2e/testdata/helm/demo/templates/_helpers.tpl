{{- define "demo.labels" -}}
app.kubernetes.io/name: demo
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "demo.selector" -}}
app.kubernetes.io/name: demo
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Cluster-scoped names carry the namespace: one release per namespace. */}}
{{- define "demo.clusterName" -}}
{{ .Release.Namespace }}-{{ .Release.Name }}
{{- end }}
