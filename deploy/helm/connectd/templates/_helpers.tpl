{{/* The release's name, as every object's name and its pods' label. */}}
{{- define "connectd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "connectd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "connectd.labels" -}}
{{ include "connectd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "connectd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "connectd.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- define "connectd.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The environment of every connectd container: the Secret, then the
     chart's non-secret variables. */}}
{{- define "connectd.env" -}}
envFrom:
  - secretRef:
      name: {{ required "existingSecret: the name of the Secret with CONNECTD_DATABASE_URL, CONNECTD_VAULT_KEYS, CONNECTD_SESSION_KEYS" .Values.existingSecret }}
env:
  - name: CONNECTD_PUBLIC_URL
    value: {{ required "publicURL: the https origin browsers use (CONNECTD_PUBLIC_URL)" .Values.publicURL | quote }}
  - name: CONNECTD_ADDR
    value: ":8080"
  - name: CONNECTD_INTERNAL_ADDR
    value: ":9090"
  - name: CONNECTD_LOG_FORMAT
    value: json
  - name: GOMEMLIMIT
    value: {{ .Values.goMemLimit | quote }}
  {{- if .Values.providersConfigMap }}
  - name: CONNECTD_PROVIDERS_FILE
    value: /etc/connectd/providers.json
  {{- end }}
  {{- range $k, $v := .Values.env }}
  - name: {{ $k }}
    value: {{ $v | quote }}
  {{- end }}
{{- end -}}

{{/* Non-root, read-only root filesystem, no capabilities. */}}
{{- define "connectd.containerSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
{{- end -}}
