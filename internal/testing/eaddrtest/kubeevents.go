package eaddrtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// APIEvent is what eaddr posts (events.k8s.io/v1), the fields checked.
type APIEvent struct {
	Metadata struct {
		Name, Namespace string
	} `json:"metadata"`
	Reason, Note, Type, Action string
	ReportingController        string `json:"reportingController"`
	Regarding                  struct {
		Kind, Name, Namespace, UID string
	} `json:"regarding"`
	Series *struct {
		Count int `json:"count"`
	} `json:"series"`
}

// EventsAPI stands in for the API server's events.k8s.io/v1 endpoints
// (TestKubeEventsAPIServer uses a real one): it keeps the Events by name
// and applies merge patches of their series.
type EventsAPI struct {
	mu     sync.Mutex
	events map[string]*APIEvent
	calls  int
	Srv    *httptest.Server
}

func NewEventsAPI(t *testing.T) *EventsAPI {
	a := &EventsAPI{events: map[string]*APIEvent{}}
	a.Srv = httptest.NewTLSServer(a)
	t.Cleanup(a.Srv.Close)
	return a
}

func (a *EventsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if r.Header.Get("Authorization") != "Bearer test-token" {
		http.Error(w, "unauthorized", 401)
		return
	}
	const prefix = "/apis/events.k8s.io/v1/namespaces/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	ns, name, _ := strings.Cut(rest, "/events")
	name = strings.TrimPrefix(name, "/")
	switch {
	case !ok:
		http.Error(w, "not found", 404)
	case r.Method == "POST" && name == "":
		var e APIEvent
		if err := json.Unmarshal(b, &e); err != nil || e.Metadata.Namespace != ns {
			http.Error(w, fmt.Sprint("bad event ", err), 400)
			return
		}
		a.events[e.Metadata.Name] = &e
		w.Write(b)
	case r.Method == "PATCH" && a.events[name] != nil:
		if err := json.Unmarshal(b, a.events[name]); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Write([]byte("{}"))
	default:
		http.Error(w, r.Method+" "+r.URL.Path, 404)
	}
}

// Snapshot returns the Events so far.
func (a *EventsAPI) Snapshot() []APIEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []APIEvent
	for _, e := range a.events {
		c := *e
		out = append(out, c)
	}
	return out
}

// KubeconfigFor writes a kubeconfig for server with a token.
func KubeconfigFor(t *testing.T, server, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: test
contexts: [{name: test, context: {cluster: test, user: eaddr}}]
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: eaddr, user: {token: %q}}]
`, server, token)
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ExhaustedPod runs pod shop/client (with uid, when given) whose two-port
// range is held toward 127.0.0.1:8080, with a busybox container "app".
func ExhaustedPod(t *testing.T, r *critest.Runtime, uid string) (*critest.Pod, *critest.Container, *netns.NS) {
	t.Helper()
	sysctls := map[string]string{"net.ipv4.ip_local_port_range": "40000 40001"}
	var pod *critest.Pod
	if uid != "" {
		pod = r.RunPodUID(t, uid, "client", "shop", nil, sysctls)
	} else {
		pod = r.RunPod(t, "client", "shop", nil, sysctls)
	}
	app := r.StartContainer(t, pod, "app", "sleep", "3600")
	ns, err := netns.Open(fmt.Sprintf("/proc/%d/ns/net", pod.PausePID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	ex, err := netns.Exhaust(ns, "tcp4", net.JoinHostPort("127.0.0.1", "8080"), 40000, 40001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return pod, app, ns
}

// WgetFails runs busybox wget in the pod n times; each must fail.
func WgetFails(t *testing.T, r *critest.Runtime, app *critest.Container, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if out, code := r.Exec(t, app, 20*time.Second, "wget", "-O", "/dev/null", "http://127.0.0.1:8080/"); code == 0 {
			t.Fatalf("wget succeeded in an exhausted pod: %s", out)
		}
	}
}

func WaitEvents(t *testing.T, get func() []APIEvent, ok func([]APIEvent) bool) []APIEvent {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		evs := get()
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("Events after 15s: %+v", evs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// APIServerWithPod starts a real API server (internal/testing/kubetest) with
// eaddr's namespace, service account and the RBAC of
// deploy/kube-events/rbac.yaml, and the Pod shop/client (Pending: there is
// no kubelet) on node-a; it returns the server, the Pod's UID and the
// service account's token.
func APIServerWithPod(t *testing.T) (*kubetest.Server, string, string) {
	t.Helper()
	s := kubetest.Start(t)
	ctx := context.Background()
	apply := func(path, contentType string, body []byte) []byte {
		t.Helper()
		resp, err := s.Do(ctx, kubetest.Request{Method: "POST", Path: path + "?fieldValidation=Strict", Body: body, ContentType: contentType})
		if err == nil {
			err = resp.Err()
		}
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return resp.Body
	}
	apply("/api/v1/namespaces", "", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"eaddr"}}`))
	apply("/api/v1/namespaces/eaddr/serviceaccounts", "", []byte(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"eaddr","namespace":"eaddr"}}`))
	rbac, err := os.ReadFile(filepath.Join(testenv.Root(), "deploy/kube-events/rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(rbac), "\n---\n")
	apply("/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/yaml", []byte(docs[0]))
	apply("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "application/yaml", []byte(docs[1]))
	apply("/api/v1/namespaces", "", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}`))
	// No controller manager makes the namespace's default account.
	apply("/api/v1/namespaces/shop/serviceaccounts", "", []byte(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default","namespace":"shop"}}`))
	var created struct {
		Metadata struct{ UID string } `json:"metadata"`
	}
	podJSON := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"client","namespace":"shop"},
		"spec":{"nodeName":"node-a","containers":[{"name":"app","image":"busybox"}]}}`
	if err := json.Unmarshal(apply("/api/v1/namespaces/shop/pods", "", []byte(podJSON)), &created); err != nil || created.Metadata.UID == "" {
		t.Fatalf("the Pod's UID: %v", err)
	}
	return s, created.Metadata.UID, s.ServiceAccountToken(t, "eaddr", "eaddr")
}

// ListEvents lists the events.k8s.io/v1 Events of namespace ns.
func ListEvents(t *testing.T, s *kubetest.Server, ns string) []APIEvent {
	t.Helper()
	resp, err := s.Do(context.Background(), kubetest.Request{Method: "GET", Path: "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"})
	if err != nil || resp.Err() != nil {
		t.Fatalf("listing Events: %v %v", err, resp.Err())
	}
	var l struct{ Items []APIEvent }
	if err := json.Unmarshal(resp.Body, &l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// DescribedAs runs the real `kubectl describe pod client -n shop` and
// checks that each doc quotes its Events section, with the Event of reason,
// as it printed it (describeExcerpt).
func DescribedAs(t *testing.T, s *kubetest.Server, reason string, docs ...string) {
	t.Helper()
	args := []string{"describe", "pod", "client", "-n", "shop"}
	out, stderr, err := s.Kubectl(t).Run(nil, args...)
	if err != nil || len(stderr) > 0 {
		t.Fatalf("%v (stderr %q)", err, stderr)
	}
	printed := EventsSection(string(out))
	if printed == nil {
		t.Fatalf("kubectl %s printed no Events section:\n%s", strings.Join(args, " "), out)
	}
	for _, doc := range docs {
		if err := DescribeExcerpt(doc, "kubectl "+strings.Join(args, " "), reason, printed); err != nil {
			t.Errorf("%v\nkubectl %s printed:\n%s", err, strings.Join(args, " "), strings.Join(printed, "\n"))
		}
	}
}

// HasReason: a line of block is a Warning Event row of reason.
func HasReason(block []string, reason string) bool {
	for _, l := range block {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Warning" && f[1] == reason {
			return true
		}
	}
	return false
}

// EventsSection is the lines of kubectl describe's output from "Events:" to
// its end, trailing blank lines left out; nil without one.
func EventsSection(out string) []string {
	lines := strings.Split(strings.TrimRight(out, "\n "), "\n")
	for i, l := range lines {
		if l == "Events:" {
			return lines[i:]
		}
	}
	return nil
}

// PerRun are the parts of kubectl describe's Events table that differ from
// run to run, and what describeExcerpt compares in their place: the Age
// cell's durations (how long ago the Event was first and last seen, e.g. "0s
// (x21 over 3s)"; kubectl's duration.HumanDuration: 3s, 2m5s, 3h) and the pid
// of the process that holds the ports (the test binary).
var PerRun = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(^|  )[0-9][0-9smhdy]* \(x(\d+) over [0-9][0-9smhdy]*\)(  )`), "${1}AGE (x${2} over AGE)${3}"},
	{regexp.MustCompile(`(^|  )[0-9][0-9smhdy]*(  )`), "${1}AGE${2}"},
	{regexp.MustCompile(`\bpid \d+\b`), "pid PID"},
}

// Normalized is line with the per-run parts replaced (perRun) and split into
// words: the columns are padded to their widest cell, which the Age cell's
// width changes, so runs of spaces are compared as one separator.
func Normalized(line string) string {
	for _, p := range PerRun {
		line = p.re.ReplaceAllString(line, p.with)
	}
	return strings.Join(strings.Fields(line), " ")
}

// DescribeExcerpt checks the fenced block of doc that holds a line
// "Events:" and an Event of reason: from that line on, it must be kubectl's
// Events section, line for line, word for word, but for the per-run parts
// (normalized). A "$ kubectl ..." line in the block must be the command
// that was run.
func DescribeExcerpt(doc, command, reason string, printed []string) error {
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	var blocks [][]string
	var cur []string
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "```") {
			if in && slices.Contains(cur, "Events:") && HasReason(cur, reason) {
				blocks = append(blocks, cur)
			}
			in, cur = !in, nil
			continue
		}
		if in {
			cur = append(cur, l)
		}
	}
	if len(blocks) != 1 {
		return fmt.Errorf("%s: %d fenced blocks with an \"Events:\" line and a %s Event, want 1", doc, len(blocks), reason)
	}
	block := blocks[0]
	for _, l := range block {
		if c, ok := strings.CutPrefix(l, "$ "); ok && c != command {
			return fmt.Errorf("%s: the excerpt says %q, the test ran %q", doc, l, command)
		}
	}
	excerpt := block[slices.Index(block, "Events:"):]
	if len(excerpt) != len(printed) {
		return fmt.Errorf("%s: the excerpt has %d lines from \"Events:\", kubectl printed %d", doc, len(excerpt), len(printed))
	}
	for i := range excerpt {
		if a, b := Normalized(excerpt[i]), Normalized(printed[i]); a != b {
			return fmt.Errorf("%s: excerpt line %d is not what kubectl printed:\n excerpt %q\n kubectl %q", doc, i+1, a, b)
		}
	}
	return nil
}

// CheckPodEvent checks that e is the Event eaddr writes for ExhaustedPod's
// failures: a Warning EphemeralPortsExhausted on the pod namespace/name with
// its uid, the verdict and the fix in its note.
func CheckPodEvent(t *testing.T, e APIEvent, namespace, name, uid string) {
	t.Helper()
	if e.Regarding.Kind != "Pod" || e.Regarding.Name != name || e.Regarding.Namespace != namespace || e.Regarding.UID != uid ||
		e.Metadata.Namespace != namespace || e.Type != "Warning" || e.Reason != "EphemeralPortsExhausted" || e.Action != "Connect" ||
		e.ReportingController != "eaddr.io/eaddr" {
		t.Errorf("Event %+v, want a Warning EphemeralPortsExhausted on pod %s/%s uid %s", e, namespace, name, uid)
	}
	if !strings.HasPrefix(e.Note, "ephemeral ports exhausted toward 127.0.0.1:8080: none of the 2 ports of 40000-40001 is free: 2 held by open connections") ||
		!strings.Contains(e.Note, "Fix: ") {
		t.Errorf("note %q: want the verdict and the fix", e.Note)
	}
	t.Logf("Event %s/%s: %s %s: %s", e.Metadata.Namespace, e.Metadata.Name, e.Type, e.Reason, e.Note)
}
