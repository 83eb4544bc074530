package kubecluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/pod/kube"
)

// hostSnapshot is what the cluster must leave as it found it.
type hostSnapshot struct {
	links, chains, mounts, nft string
	sysctls                    map[string]string
	cgroups                    []string
	created                    []string
}

func snapshot() hostSnapshot {
	links, _ := os.ReadDir("/sys/class/net")
	var names []string
	for _, l := range links {
		names = append(names, l.Name())
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	var mountPoints []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			mountPoints = append(mountPoints, f[4])
		}
	}
	return hostSnapshot{
		links:   strings.Join(names, " "),
		chains:  fmt.Sprint(kubeChains()),
		nft:     fmt.Sprint(nftTables()),
		mounts:  strings.Join(mountPoints, "\n"),
		sysctls: readSysctls(),
		cgroups: critest.CgroupTree(CgroupRoot),
		created: missingPaths(),
	}
}

// compare reports every difference between before and after.
func (before hostSnapshot) compare(t *testing.T, after hostSnapshot) {
	t.Helper()
	if before.links != after.links {
		t.Errorf("network interfaces: before %s, after %s", before.links, after.links)
	}
	if before.chains != after.chains {
		t.Errorf("KUBE-* iptables chains: before %s, after %s", before.chains, after.chains)
	}
	if before.nft != after.nft {
		t.Errorf("nftables tables: before %s, after %s", before.nft, after.nft)
	}
	if before.mounts != after.mounts {
		t.Errorf("mounts differ:\nbefore:\n%s\nafter:\n%s", before.mounts, after.mounts)
	}
	for k, v := range before.sysctls {
		if after.sysctls[k] != v {
			t.Errorf("sysctl %s: before %s, after %s", k, v, after.sysctls[k])
		}
	}
	if len(after.cgroups) != 0 {
		t.Errorf("cgroups left: %v", after.cgroups)
	}
	if fmt.Sprint(before.created) != fmt.Sprint(after.created) {
		t.Errorf("host paths missing before start: %v, after stop: %v", before.created, after.created)
	}
}

// TestCluster starts a cluster with its pod logs in /var/log/pods (where
// log agents read them), runs a pod from the busybox image with the real
// kubectl (run, logs, exec), checks its log file there, where its process's
// cgroup is and that eaddr's parser attributes it, stops the cluster and
// checks that the host is as it was.
func TestCluster(t *testing.T) {
	testenv.RequireRoot(t)
	// Held around the snapshots: another test binary's cluster would be in them.
	t.Cleanup(LockHost(t))
	// What a killed run left is restored by Start: compare with the host after that.
	if err := TeardownStale(t.Logf); err != nil {
		t.Fatal(err)
	}
	before := snapshot()
	t.Cleanup(func() { before.compare(t, snapshot()) }) // after the cluster's cleanup
	c := StartWith(t, Options{PodLogsDir: "/var/log/pods"})
	k := c.Kubectl
	if _, _, err := k.Run(nil, "run", "sleeper", "--image="+critest.Image, "--image-pull-policy=Never",
		"--restart=Never", "--labels=app=sleeper", "--command", "--", "sh", "-c", "echo hello from the pod; exec sleep 1000"); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, _, err := k.Run(nil, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, describe(k, "pod/sleeper"))
	}
	t.Logf("pod Ready %s after kubectl run", time.Since(begin).Round(100*time.Millisecond))
	out, _, err := k.Run(nil, "logs", "sleeper")
	if err != nil || !strings.Contains(string(out), "hello from the pod") {
		t.Errorf("kubectl logs sleeper: %q, %v", out, err)
	}
	out, _, err = k.Run(nil, "exec", "sleeper", "--", "cat", "/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	checkCgroup(t, c, string(out))
	logs, _ := filepath.Glob("/var/log/pods/default_sleeper_*/sleeper/0.log")
	if len(logs) != 1 {
		t.Errorf("the pod's log file in /var/log/pods: found %v", logs)
	} else if b, err := os.ReadFile(logs[0]); err != nil || !strings.Contains(string(b), " stdout F hello from the pod") {
		t.Errorf("%s: %q, %v; want a CRI log line of stdout", logs[0], b, err)
	}
	c.Stop()
	if _, err := os.Stat(c.Dir); err == nil {
		t.Errorf("%s is still there", c.Dir)
	}
	if left := processesMatching(c.Dir+"/", "-address "+CRISocket); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// checkCgroup checks the unified ("0::") line of a pod process's
// /proc/self/cgroup: under CgroupRoot, and attributed by pod/kube to the
// pod's UID.
func checkCgroup(t *testing.T, c *Cluster, procCgroup string) {
	t.Helper()
	var path string
	for _, line := range strings.Split(procCgroup, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path = p
		}
	}
	t.Logf("the pod's process is in cgroup %s", path)
	if !strings.HasPrefix(path, CgroupRoot+"/kubepods/besteffort/pod") {
		t.Errorf("pod cgroup %q is not below %s/kubepods/besteffort", path, CgroupRoot)
	}
	uid, _, err := c.Kubectl.Run(nil, "get", "pod", "sleeper", "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := kube.ParseCgroupPath(path)
	if !ok || p.UID != string(uid) || p.QoS != "besteffort" || len(p.ContainerID) != 64 {
		t.Errorf("kube.ParseCgroupPath(%q) = %+v, %v; want pod UID %s, besteffort, a container ID", path, p, ok, uid)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/unified", path)); err != nil {
		t.Errorf("the pod's cgroup is not in the unified tree: %v", err)
	}
}

// describe is kubectl describe of what, for a failure message.
func describe(k interface {
	Run([]byte, ...string) ([]byte, []byte, error)
}, what string) string {
	out, _, err := k.Run(nil, "describe", what)
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// TestPackagesListed: every Debian package that Start's skips name is one
// that .ci/deps.sh installs.
func TestPackagesListed(t *testing.T) {
	listed := testenv.DepsPackages(t)
	for _, p := range append(programs, files...) {
		if !listed[p[1]] {
			t.Errorf("%s: Debian package %s is not in .ci/deps.sh", p[0], p[1])
		}
	}
}

// TestTablesWithKube: the iptables-save dump loses the KUBE-* lines of the
// tables that have any, keeps the rest, and leaves other tables out.
func TestTablesWithKube(t *testing.T) {
	dump := `# Generated by iptables-nft-save
*mangle
:PREROUTING ACCEPT [0:0]
:KUBE-IPTABLES-HINT - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FIREWALL
-A INPUT -p tcp --dport 22 -j ACCEPT
COMMIT
*raw
:PREROUTING ACCEPT [0:0]
COMMIT
`
	got := tablesWithKube(dump)
	want := map[string]string{
		"mangle": "*mangle\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n",
		"filter": "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tablesWithKube:\n%q\nwant\n%q", got, want)
	}
}
