// Package kube maps failures to Kubernetes pods and containers: from the
// cgroup path of the failing process (offline), and from the container
// runtime over CRI (names, namespace, image, labels).
package kube

import "strings"

// CgroupPod is what a cgroup path says about a pod and container.
type CgroupPod struct {
	UID         string // pod UID with dashes (static pods: the config hash)
	QoS         string // guaranteed, burstable or besteffort
	ContainerID string // 64 hex digits; empty for the pod-level cgroup
	Runtime     string // containerd, cri-o, docker, or "" when the path does not say
}

// ParseCgroupPath finds the pod and container in a cgroup path of any of the
// layouts kubelets use: the cgroupfs driver (/kubepods/burstable/pod<uid>/<id>),
// the systemd driver (/kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope),
// CRI-O (crio-<id>.scope), docker and cri-dockerd (docker-<id>.scope),
// containerd's systemd form on cgroup v1 (...slice:cri-containerd:<id>), and
// the prefixes of kind, minikube, k3s and managed clusters (anything before
// the kubepods level). Below the container's cgroup, the path may go on (crun
// puts the process in crio-<id>.scope/container). ok is false when the path
// is not a pod's, and for a runtime's own process in the pod's cgroup (CRI-O's
// conmon, see isRuntimeMonitor).
func ParseCgroupPath(path string) (p CgroupPod, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, part := range parts {
		uid, qos, rest, found := podComponent(part)
		if !found {
			continue
		}
		p.UID, p.QoS = uid, qos
		if p.QoS == "" {
			p.QoS = qosFromParents(parts[:i])
		}
		leaf := rest // containerd's "...slice:cri-containerd:<id>" in the same component
		if leaf == "" && i+1 < len(parts) {
			leaf = parts[i+1]
		}
		if isRuntimeMonitor(leaf) {
			return CgroupPod{}, false
		}
		p.ContainerID, p.Runtime = containerComponent(leaf)
		return p, true
	}
	return CgroupPod{}, false
}

// isRuntimeMonitor is true for the cgroup CRI-O gives the conmon of a
// container beside the container's own when conmon_cgroup is "pod":
// crio-conmon-<id>.scope in the pod's slice (systemd manager),
// crio-conmon-<id> in the pod's cgroup (cgroupfs). conmon is CRI-O's monitor
// of container <id>, started by CRI-O in the node's namespaces, not in the
// pod's: the pod is charged for it, but its failures (the attach socket it
// binds, a connect from the node's netns) are not the pod's, and taking them
// for the pod's would send an operator to a workload that did not fail.
func isRuntimeMonitor(s string) bool {
	return strings.HasPrefix(s, "crio-conmon-")
}

// podComponent recognises "pod<uid>" (cgroupfs) and
// "[kubelet-]kubepods[-<qos>]-pod<uid>.slice[:runtime:id]" (systemd).
func podComponent(s string) (uid, qos, rest string, ok bool) {
	name := s
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name, rest = name[:i], name[i+1:]
	}
	if strings.HasSuffix(name, ".slice") {
		name = strings.TrimSuffix(name, ".slice")
		i := strings.LastIndex(name, "-pod")
		if i < 0 || !strings.Contains(name[:i], "kubepods") {
			return "", "", "", false
		}
		prefix := name[:i]
		switch {
		case strings.HasSuffix(prefix, "-besteffort"):
			qos = "besteffort"
		case strings.HasSuffix(prefix, "-burstable"):
			qos = "burstable"
		default:
			qos = "guaranteed"
		}
		uid = strings.ReplaceAll(name[i+len("-pod"):], "_", "-")
	} else {
		if !strings.HasPrefix(name, "pod") {
			return "", "", "", false
		}
		uid = name[len("pod"):]
	}
	if !validUID(uid) {
		return "", "", "", false
	}
	return uid, qos, rest, true
}

// validUID accepts a UUID (8-4-4-4-12 hex) or the 32 hex digits of a static
// pod's config hash.
func validUID(s string) bool {
	switch len(s) {
	case 36:
		for i, c := range s {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if c != '-' {
					return false
				}
			} else if !isHex(byte(c)) {
				return false
			}
		}
		return true
	case 32:
		return allHex(s)
	}
	return false
}

func qosFromParents(parents []string) string {
	for i := len(parents) - 1; i >= 0; i-- {
		switch parents[i] {
		case "besteffort":
			return "besteffort"
		case "burstable":
			return "burstable"
		case "kubepods":
			return "guaranteed"
		}
	}
	return "guaranteed"
}

// containerComponent reads a container's cgroup name: "<id>",
// "cri-containerd-<id>.scope", "crio-<id>.scope", "docker-<id>.scope",
// "cri-containerd:<id>" (after a slice), and returns the id and runtime.
func containerComponent(s string) (id, runtime string) {
	s = strings.TrimSuffix(s, ".scope")
	for _, rt := range []struct{ prefix, name string }{
		{"cri-containerd-", "containerd"}, {"cri-containerd:", "containerd"},
		{"crio-", "cri-o"}, {"crio:", "cri-o"},
		{"docker-", "docker"}, {"docker:", "docker"},
		{"cri-dockerd-", "docker"},
	} {
		if strings.HasPrefix(s, rt.prefix) {
			s, runtime = s[len(rt.prefix):], rt.name
			break
		}
	}
	if len(s) != 64 || !allHex(s) {
		return "", ""
	}
	return s, runtime
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return s != ""
}
