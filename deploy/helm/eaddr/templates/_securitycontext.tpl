{{/*
The container's securityContext: deploy/base/daemonset.yaml's, whose comments and
docs/kubernetes.md say what each capability is for. Not a value: without any one of them eaddr
fails to attach, to diagnose or to name the process. NET_ADMIN comes only with
nodePortCollisions.enabled, as in deploy/nodeport-collisions.
*/}}
{{- define "eaddr.securityContext" -}}
securityContext:
  # Root: capabilities are granted to uid 0 here; files eaddr reads are root's.
  runAsUser: 0
  runAsGroup: 0
  runAsNonRoot: false
  privileged: false
  readOnlyRootFilesystem: true
  # Kubernetes documents privilege escalation as always allowed with SYS_ADMIN.
  allowPrivilegeEscalation: true
  capabilities:
    drop: ["ALL"]
    # Names without "CAP_": containerd prefixes them.
    add:
      # bpf(2): load the programs, create the ring buffer and maps.
      - BPF
      # perf_event_open(2) on the two tracepoints.
      - PERFMON
      # setns(2) into other pods' netns for the diagnosis; mount tracefs if the node has not.
      - SYS_ADMIN
      # /proc/PID/ns/net, /proc/PID/exe and /proc/PID/fd/* of others' processes.
      - SYS_PTRACE
      # List /proc/PID/fd of processes of other uids.
      - DAC_READ_SEARCH
      {{- if .Values.nodePortCollisions.enabled }}
      # Read kube-proxy's rules, to name the Service of a NodePort rule (--nodeport-collisions).
      - NET_ADMIN
      {{- end }}
  seccompProfile:
    type: RuntimeDefault
  # The runtimes' default AppArmor profile denies what eaddr reads of host processes.
  appArmorProfile:
    type: Unconfined
{{- end }}
