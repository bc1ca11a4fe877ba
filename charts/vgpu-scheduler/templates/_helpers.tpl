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

{{/* The placement annotations as a CEL list: only the scheduler, and HAMi's
device plugin for what it writes, may set or change them. */}}
{{- define "vgpu-scheduler.celPlacementAnnotations" -}}
['hami.io/vgpu-node', 'hami.io/vgpu-devices-to-allocate', 'hami.io/vgpu-devices-allocated', 'hami.io/bind-phase', 'hami.io/vgpu-mig-allocations', 'vgpu-scheduler.io/gang-plan-deadline', 'vgpu-scheduler.io/pipelined-plan']
{{- end }}

{{/* "true" when the ValidatingAdmissionPolicy guarding placement annotations is
rendered (enabled, and the API server serves admissionregistration.k8s.io/v1
policies: Kubernetes 1.30+); empty otherwise. The webhook guards them itself
only where the policy is not there. */}}
{{- define "vgpu-scheduler.placementPolicyRendered" -}}
{{- if and .Values.scheduler.placementPolicy.enabled (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) -}}
true
{{- end -}}
{{- end }}

{{/* The spec of a Job running `vgpu-scheduler certs`: dict root, serviceAccount, allowMissingWebhook. */}}
{{- define "vgpu-scheduler.certsJobSpec" -}}
{{- $name := include "vgpu-scheduler.fullname" .root }}
{{- $s := .root.Values.scheduler -}}
backoffLimit: 4
template:
  metadata:
    labels:
      app.kubernetes.io/name: {{ $name }}-certs
      {{ $s.admissionWebhook.optOutLabel }}: ignore
  spec:
    serviceAccountName: {{ .serviceAccount }}
    restartPolicy: Never
    securityContext:
      runAsNonRoot: true
      runAsUser: 65532
      runAsGroup: 65532
      seccompProfile:
        type: RuntimeDefault
    containers:
    - name: certs
      image: {{ $s.extender.image }}:{{ $s.extender.imageTag | default .root.Chart.AppVersion }}
      imagePullPolicy: {{ $s.extender.imagePullPolicy }}
      args:
      - certs
      - --namespace={{ .root.Release.Namespace }}
      - --secret-name={{ $name }}-tls
      - --service-name={{ $name }}
      {{- if $s.admissionWebhook.enabled }}
      - --webhook-name={{ $name }}
      {{- else }}
      - --webhook-name=
      {{- end }}
      {{- if .allowMissingWebhook }}
      - --allow-missing-webhook
      {{- end }}
      {{- if $s.extenderClientAuth }}
      - --client-cert
      {{- end }}
      - --ca-validity={{ $s.certs.caValidity }}
      - --ca-renew-before={{ $s.certs.caRenewBefore }}
      - --cert-validity={{ $s.certs.certValidity }}
      - --client-cert-validity={{ $s.certs.clientCertValidity }}
      - --renew-before={{ $s.certs.renewBefore }}
      resources:
        requests:
          cpu: 10m
          memory: 32Mi
        limits:
          cpu: 200m
          memory: 64Mi
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        readOnlyRootFilesystem: true
        allowPrivilegeEscalation: false
        capabilities:
          drop: [ALL]
{{- end }}
