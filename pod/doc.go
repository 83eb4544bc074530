// Package pod says who failed: cgroup id to cgroup path (CgroupResolver),
// cgroup path to pod and container (PodMapper), the names from the
// container runtime (pod/kube), a netns to a pod only by its cookie and only
// when sure, and why not when it cannot (pod_unresolved). It never guesses
// and knows nothing of JSON.
package pod
