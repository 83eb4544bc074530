package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// The seed's second story on the node: the node's ip_local_port_range
// (npRangeLo-npRangeHi, ten ports) lies inside the NodePort range, each of
// its ports a NodePort of Service shop/gateway (kube-proxy's iptables
// rules), and a rule of the test's own takes, as IPVS does, the SYN-ACKs
// that pods send to NodePort-range ports of the node: the kubelet's probe
// of pod shop/web, from such a source port, never completes.
const (
	npRangeLo = 30100
	npRangeHi = 30109
	npTable   = "eaddr_nodeport_story" // inet: the test's SYN-ACK catcher

	// npWait bounds each wait once the range is narrowed (3 s when it
	// works): short of eaddr's own liveness (its probes fail too: 3 x 20 s),
	// so that a failure's dump is of the container that saw the story.
	npWait = 40 * time.Second
)

// probedPod is pod shop/web, busybox httpd on 8080 with an httpGet
// liveness probe (the server closes each connection first: the kubelet's
// side of a probe leaves no TIME_WAIT to fill the node's ten ports); and
// another pod's NodePort Service, shop/gateway, whose nodePorts are the
// node's whole range (its backend has no probe: its endpoints, and so
// kube-proxy's NodePort rules, stay while web's probe fails).
func probedPod() string {
	var ports strings.Builder
	for p := npRangeLo; p <= npRangeHi; p++ {
		fmt.Fprintf(&ports, "    - {name: p%d, port: %d, targetPort: 8080, nodePort: %d}\n", p-npRangeLo, 8000+p-npRangeLo, p)
	}
	pod := func(name string, probe string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: shop, labels: {app: ` + name + `}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: ` + name + `
      image: ` + critest.Image + `
      imagePullPolicy: Never
      command: [sh, -c, "mkdir -p /tmp/www && echo ok > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]
      ports: [{containerPort: 8080}]
` + probe + "---\n"
	}
	return `apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {pod-security.kubernetes.io/enforce: baseline}
---
` + pod("web", `      startupProbe:
        httpGet: {path: /, port: 8080}
        periodSeconds: 1
        failureThreshold: 60
      livenessProbe:
        httpGet: {path: /, port: 8080}
        periodSeconds: 2
        timeoutSeconds: 1
`) + pod("gateway", "") + `apiVersion: v1
kind: Service
metadata: {name: gateway, namespace: shop}
spec:
  type: NodePort
  selector: {app: gateway}
  ports:
` + ports.String()
}

// nodePort: eaddr's DaemonSet with --nodeport-collisions (and NET_ADMIN),
// the probed pod and its Service, then the node's range narrowed into the
// NodePort range. The kubelet's probe fails (Unhealthy); eaddr's log has
// the kubelet's nodeport_collision whose diagnosis names the probed pod
// and the Service's NodePort rule for its source port; and kubectl
// describe pod shows eaddr's Warning SourcePortInNodePortRange beside the
// kubelet's Unhealthy, as docs/kubernetes.md quotes it.
func (s *stories) nodePort(t *testing.T) {
	pod := s.nodePortEaddr(t)
	ip := s.startProbedPod(t)
	t.Cleanup(func() { s.dumpNodePort(t, pod) }) // runs last: kubectl with the range back
	s.narrowNode(t)
	begin := time.Now()
	// The story's Unhealthy is the liveness probe's timeout: the reply was
	// taken by the NodePort rule.
	unhealthy := s.waitPodEvent(t, "Unhealthy", "Liveness probe failed: ", "context deadline exceeded")
	warning := s.waitPodEvent(t, "SourcePortInNodePortRange")
	line := s.waitCollision(t, pod, ip)
	t.Logf("after %s: the kubelet's %q; eaddr's Event %q; eaddr's line %s", time.Since(begin).Round(100*time.Millisecond), unhealthy, warning, line)
	s.widenNode(t)
	s.describeProbedPod(t)
}

// nodePortEaddr applies deploy/nodeport-collisions, the shipped overlay
// (--nodeport-collisions and NET_ADMIN, without which eaddr cannot read
// kube-proxy's rules to name the Service: docs/kubernetes.md,
// "Capabilities"), with the image's tag, and returns eaddr's new pod once
// attached. No --nodeport-netns: eaddr finds the node's netns itself, also
// on this VM where pid 1's is hidden even from root (netdiag.HostInode:
// kthreadd's, never its own pod's).
func (s *stories) nodePortEaddr(t *testing.T) string {
	t.Helper()
	if _, _, err := s.k.Run(nil, "apply", "-k", imageOverlay(t, s.tag, "nodeport-collisions")); err != nil {
		t.Fatal(err)
	}
	pod := waitDaemonSetPod(t, s.k)
	waitLogLine(t, s.k, []string{"-n", "eaddr", pod}, func(l string) bool { return strings.Contains(l, "level=INFO msg=attached") })
	return pod
}

// startProbedPod makes probedPod, waits for it to be Ready (its startup
// probe has passed: httpd answers, while the node's range is its own;
// without it Ready came before httpd listened on a loaded machine and the
// first liveness probe's "connection refused" was taken for the story's)
// and for kube-proxy's NodePort rules, and returns the pod's IP.
func (s *stories) startProbedPod(t *testing.T) string {
	t.Helper()
	if _, _, err := s.k.Run([]byte(probedPod()), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.k.Run(nil, "-n", "shop", "wait", "--for=condition=Ready", "pod/web", "pod/gateway", "--timeout=90s"); err != nil {
		out, _, _ := s.k.Run(nil, "-n", "shop", "describe", "pod", "web")
		t.Fatalf("%v\n%s", err, out)
	}
	ip, _, err := s.k.Run(nil, "-n", "shop", "get", "pod", "web", "-o", "jsonpath={.status.podIP}")
	if err != nil {
		t.Fatal(err)
	}
	var nat []byte
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		nat, _ = exec.Command("iptables-save", "-t", "nat").Output()
		if len(nodePortRules(nat)) == npRangeHi-npRangeLo+1 {
			return string(ip)
		}
	}
	t.Fatalf("kube-proxy wrote %d of the %d NodePort rules of shop/gateway within a minute: %v", len(nodePortRules(nat)), npRangeHi-npRangeLo+1, nodePortRules(nat))
	return ""
}

// nodePortRule is a KUBE-NODEPORTS rule of shop/gateway, as iptables-save
// prints it.
var nodePortRule = regexp.MustCompile(`(?m)^-A KUBE-NODEPORTS .*--comment "?shop/gateway:p\d"? .*--dport (\d+) `)

func nodePortRules(nat []byte) []string {
	var ports []string
	for _, m := range nodePortRule.FindAllSubmatch(nat, -1) {
		ports = append(ports, string(m[1]))
	}
	return ports
}

// narrowNode adds the SYN-ACK catcher (pods' SYN-ACKs to NodePort-range
// ports of the node: the pod subnet only, so that the node's own
// connections live) and narrows the host's range into the NodePort range.
// Both are recorded in the cluster's state, undone at its teardown also
// when the test fails; widenNode undoes them at once.
func (s *stories) narrowNode(t *testing.T) {
	t.Helper()
	remove, err := s.c.AddNftTable("inet", npTable, fmt.Sprintf(`  chain input {
    type filter hook input priority filter; policy accept;
    ip saddr %s tcp flags & (syn | ack) == (syn | ack) tcp dport 30000-32767 counter drop
  }`, s.c.PodSubnet))
	if err != nil {
		t.Fatal(err)
	}
	restore, err := s.c.SetSysctl("net/ipv4/ip_local_port_range", fmt.Sprintf("%d %d", npRangeLo, npRangeHi))
	if err != nil {
		remove()
		t.Fatal(err)
	}
	s.undoNarrow = func() error {
		if t.Failed() {
			dumpHostNet(t)
		}
		return errors.Join(restore(), remove())
	}
	t.Cleanup(func() { s.widenNode(t) })
}

// widenNode undoes narrowNode (once).
func (s *stories) widenNode(t *testing.T) {
	t.Helper()
	if s.undoNarrow == nil {
		return
	}
	if err := s.undoNarrow(); err != nil {
		t.Error(err)
	}
	s.undoNarrow = nil
}

// dumpHostNet logs what the kernel and kube-proxy did: the NodePort rules,
// the catcher's counter, the node's sockets in SYN-SENT and conntrack.
func dumpHostNet(t *testing.T) {
	t.Helper()
	for _, c := range [][]string{{"sh", "-c", "iptables-save -t nat | grep -e KUBE-NODEPORTS -e shop/gateway"},
		{"nft", "list", "table", "inet", npTable}, {"ss", "-tanpo", "state", "syn-sent"},
		{"sh", "-c", "cat /proc/net/nf_conntrack 2>&1 | grep -e dport=301 | tail -20"}} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		t.Logf("$ %s (%v)\n%s", strings.Join(c, " "), err, out)
	}
}

// apiGet GETs path as the admin through the API server's client, whose
// connection is kept: no new source port for each poll, while the node's
// range has ten ports (each kubectl run would leave one in TIME_WAIT).
func (s *stories) apiGet(t *testing.T, path string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.c.API.Do(ctx, kubetest.Request{Method: "GET", Path: path})
	if err == nil {
		err = resp.Err()
	}
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.Body
}

// waitPodEvent waits for an Event of reason on pod shop/web whose message
// contains each of contains, and returns it.
func (s *stories) waitPodEvent(t *testing.T, reason string, contains ...string) string {
	t.Helper()
	var list struct {
		Items []struct {
			Reason, Message, Type string
			Source                struct{ Component string }
		}
	}
	for deadline := time.Now().Add(npWait); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		b := s.apiGet(t, "/api/v1/namespaces/shop/events?fieldSelector=involvedObject.name%3Dweb")
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(list.Items, func(e struct {
			Reason, Message, Type string
			Source                struct{ Component string }
		}) bool {
			return e.Reason == reason && !slices.ContainsFunc(contains, func(c string) bool { return !strings.Contains(e.Message, c) })
		}); i >= 0 {
			return list.Items[i].Type + " " + list.Items[i].Message
		}
	}
	t.Fatalf("no %s Event on shop/web within %v; its Events: %+v", reason, npWait, list.Items)
	return ""
}

// collision is what the story reads of a nodeport_collision line.
type collision struct {
	Kind    string
	Process struct{ Comm string }
	Local   struct{ Port int }
	Remote  struct{ IP string }
	Diag    struct {
		Verdict   string
		RemotePod *struct{ Name, Namespace string } `json:"remote_pod"`
	} `json:"diagnosis"`
}

// waitCollision waits for eaddr's line of the kubelet's connect to ip: a
// nodeport_collision whose diagnosis names pod shop/web and the Service's
// NodePort rule for its source port. It returns the line.
func (s *stories) waitCollision(t *testing.T, eaddrPod, ip string) string {
	t.Helper()
	var seen []string
	for deadline := time.Now().Add(npWait); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		for _, l := range strings.Split(string(s.apiGet(t, "/api/v1/namespaces/eaddr/pods/"+eaddrPod+"/log")), "\n") {
			var c collision
			if json.Unmarshal([]byte(l), &c) != nil || c.Kind != "nodeport_collision" || c.Remote.IP != ip || slices.Contains(seen, l) {
				continue
			}
			seen = append(seen, l)
			rule := fmt.Sprintf("the node has a NodePort rule for tcp/%d: Service shop/gateway:p%d ", c.Local.Port, c.Local.Port-npRangeLo)
			if c.Process.Comm == "kubelet" && c.Diag.RemotePod != nil && c.Diag.RemotePod.Name == "web" &&
				c.Diag.RemotePod.Namespace == "shop" && strings.Contains(c.Diag.Verdict, rule) {
				return l
			}
		}
	}
	t.Fatalf("eaddr's log has no kubelet nodeport_collision toward %s naming shop/web and its NodePort rule within %v; toward %s it had:\n%s",
		ip, npWait, ip, lastN(strings.Join(seen, "\n"), 10))
	return ""
}

// dumpNodePort logs, when the test failed, kubectl describe of the probed
// pod and of eaddr's, and the tail of eaddr's log.
func (s *stories) dumpNodePort(t *testing.T, eaddrPod string) {
	if !t.Failed() {
		return
	}
	for _, args := range [][]string{{"-n", "shop", "describe", "pod", "web"}, {"-n", "eaddr", "describe", "pod", eaddrPod},
		{"-n", "eaddr", "logs", eaddrPod, "--tail=30"}} {
		out, _, err := s.k.Run(nil, args...)
		t.Logf("$ kubectl %s (%v)\n%s", strings.Join(args, " "), err, out)
	}
}

// describeProbedPod runs kubectl describe pod web -n shop (the node's range
// given back) and checks that its Events show the kubelet's Unhealthy and
// eaddr's Warning SourcePortInNodePortRange, and that docs/kubernetes.md's
// quote of them is what it printed.
func (s *stories) describeProbedPod(t *testing.T) {
	t.Helper()
	args := []string{"describe", "pod", "web", "-n", "shop"}
	out, _, err := s.k.Run(nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	i := strings.Index(text, "\nEvents:\n")
	if i < 0 {
		t.Fatalf("kubectl describe pod web printed no Events:\n%s", out)
	}
	events := strings.Split(strings.TrimRight(text[i+1:], "\n"), "\n")
	t.Logf("$ kubectl %s\n...\n%s", strings.Join(args, " "), strings.Join(events, "\n"))
	for _, want := range [][]string{{"Warning", "Unhealthy", "kubelet", "Liveness probe failed"},
		{"Warning", "SourcePortInNodePortRange", "eaddr.io/eaddr", "the kubelet (pid"}} {
		if !slices.ContainsFunc(events, func(l string) bool { return containsAll(l, want) }) {
			t.Errorf("kubectl describe pod web shows no event line with %q", want)
		}
	}
	if err := eventsExcerpt("../docs/kubernetes.md", "$ kubectl "+strings.Join(args, " "), events); err != nil {
		t.Error(err)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// What differs per run in an Event line: the Age column (with its count),
// kube-proxy's chain of the Service port that the source port happened to
// be (its name a hash of the port's), then any number (pids, addresses,
// source ports).
var (
	eventAge  = regexp.MustCompile(`\b\d+(m\d+)?[smhd](?: \(x\d+ over \d+(m\d+)?[smhd]\)|\b)`)
	kubeChain = regexp.MustCompile(`\bKUBE-(EXT|SVC|SEP|FW)-[A-Z0-9]{16}\b`)
	digits    = regexp.MustCompile(`\d+`)
	// numberList is a list of numbers (after digits), such as the ports
	// the node listens on that a fix reserves: which and how many differ
	// per run.
	numberList = regexp.MustCompile(`N(,\s?)N(,\s?N)*`)
)

// sameNote compares two normalized Event lines. The API server's notes are
// cut at 1 KiB and end in "..." (kubeevent), at a point that moves with the
// lengths of what differs per run: a line cut so is compared as far as both
// go.
func sameNote(a, b string) bool {
	ca, cutA := strings.CutSuffix(a, "...")
	cb, cutB := strings.CutSuffix(b, "...")
	switch {
	case cutA && cutB:
		return strings.HasPrefix(ca, cb) || strings.HasPrefix(cb, ca)
	case cutA:
		return strings.HasPrefix(b, ca)
	case cutB:
		return strings.HasPrefix(a, cb)
	}
	return a == b
}

// eventsExcerpt checks the fenced block of doc that begins with command:
// each of its lines from "Events:" on, but for a "..." line (lines left
// out), must be one kubectl printed (Events in any order: kubectl sorts
// them by time, which differs per run), but for the Age column, the
// numbers and lists of numbers, kube-proxy's chain hashes and where a note
// was cut (sameNote), runs of spaces counting as one.
func eventsExcerpt(doc, command string, printed []string) error {
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	norm := func(l string) string {
		l = kubeChain.ReplaceAllString(eventAge.ReplaceAllString(l, "AGE"), "KUBE-$1-HASH")
		l = numberList.ReplaceAllString(digits.ReplaceAllString(l, "N"), "N${1}...")
		return strings.Join(strings.Fields(l), " ")
	}
	paste := fmt.Sprintf("paste (leaving lines out as ...):\n%s\n...\n%s", command, strings.Join(printed, "\n"))
	_, after, ok := strings.Cut(string(data), "```\n"+command+"\n")
	block, _, closed := strings.Cut(after, "\n```")
	if !ok || !closed {
		return fmt.Errorf("%s: no fenced block that begins %q; %s", doc, command, paste)
	}
	lines := strings.Split(block, "\n")
	e := slices.Index(lines, "Events:")
	if e < 0 {
		return fmt.Errorf("%s: the block of %q has no Events: line", doc, command)
	}
	for _, l := range lines[e:] {
		if l != "..." && !slices.ContainsFunc(printed, func(p string) bool { return sameNote(norm(p), norm(l)) }) {
			return fmt.Errorf("%s: the excerpt's line %q is not one kubectl printed; %s", doc, norm(l), paste)
		}
	}
	return nil
}
