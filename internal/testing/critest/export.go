package critest

// BuildImage writes Image (busybox-static, see Image) as an OCI archive to
// path and returns its manifest digest, for runtimes other than Start's
// (internal/testing/kubecluster imports it into a kubelet's containerd: its sandbox
// image and the tests' workloads).
func BuildImage(path string) (string, error) { return buildImage(path) }
