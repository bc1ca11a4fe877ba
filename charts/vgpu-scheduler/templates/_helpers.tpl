{{/* Name of every object: the release name unless fullnameOverride is set. */}}
{{- define "vgpu-scheduler.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 -}}
{{- end }}

{{/* Labels of every object. */}}
{{- define "vgpu-scheduler.labels" -}}
app.kubernetes.io/name: {{ include "vgpu-scheduler.fullname" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Labels the Deployment, Service and PodDisruptionBudget select on. */}}
{{- define "vgpu-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vgpu-scheduler.fullname" . }}
{{- end }}

{{/* kube-scheduler's tag: the value, else the cluster's version without suffixes. */}}
{{- define "vgpu-scheduler.kubeSchedulerTag" -}}
{{- .Values.scheduler.kubeScheduler.imageTag | default (regexReplaceAll "[-+].*$" .Capabilities.KubeVersion.Version "") -}}
{{- end }}

{{/* kube-scheduler's Lease. */}}
{{- define "vgpu-scheduler.kubeSchedulerLease" -}}
{{- .Values.scheduler.kubeScheduler.leaseName | default (printf "%s-kube-scheduler" .Values.schedulerName) -}}
{{- end }}

{{/* The pod resources that make a pod ours, as a CEL list. */}}
{{- define "vgpu-scheduler.celResources" -}}
{{- printf "['%s', '%s', '%s', '%s']" .Values.resourceName .Values.resourceMem .Values.resourceMemPercentage .Values.resourceCores -}}
{{- end }}
