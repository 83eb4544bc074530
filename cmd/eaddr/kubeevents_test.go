package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/critest"
	"github.com/eaddr/eaddr/internal/netns"
)

// apiEvent is what eaddr posts (events.k8s.io/v1), the fields checked.
type apiEvent struct {
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

// eventsAPI stands in for the API server's events.k8s.io/v1 endpoints
// (TestKubeEventsAPIServer uses a real one): it keeps the Events by name
// and applies merge patches of their series.
type eventsAPI struct {
	mu     sync.Mutex
	events map[string]*apiEvent
	calls  int
	srv    *httptest.Server
}

func newEventsAPI(t *testing.T) *eventsAPI {
	a := &eventsAPI{events: map[string]*apiEvent{}}
	a.srv = httptest.NewTLSServer(a)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *eventsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		var e apiEvent
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

// snapshot returns the Events so far.
func (a *eventsAPI) snapshot() []apiEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []apiEvent
	for _, e := range a.events {
		c := *e
		out = append(out, c)
	}
	return out
}

// kubeconfigFor writes a kubeconfig for server with a token.
func kubeconfigFor(t *testing.T, server, token string) string {
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

// exhaustedPod runs pod shop/client (with uid, when given) whose two-port
// range is held toward 127.0.0.1:8080, with a busybox container "app".
func exhaustedPod(t *testing.T, r *critest.Runtime, uid string) (*critest.Pod, *critest.Container, *netns.NS) {
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

// wgetFails runs busybox wget in the pod n times; each must fail.
func wgetFails(t *testing.T, r *critest.Runtime, app *critest.Container, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if out, code := r.Exec(t, app, 20*time.Second, "wget", "-O", "/dev/null", "http://127.0.0.1:8080/"); code == 0 {
			t.Fatalf("wget succeeded in an exhausted pod: %s", out)
		}
	}
}

// --kube-events: a pod's exhausted port range becomes one Warning Event on
// that pod (its name, namespace and UID), the verdict and the fix as its
// note; a storm of the same failure is the same Event, its count grown.
// With the API server gone, tracing goes on and what reached no Event is
// counted.
func TestKubeEvents(t *testing.T) {
	r := critest.Start(t)
	pod, app, ns := exhaustedPod(t, r, "")
	api := newEventsAPI(t)
	p := startTrace(t, "--cri-endpoint", r.Socket, "--netns", strconv.FormatUint(ns.Inode(), 10), "--kube-events",
		"--kubeconfig", kubeconfigFor(t, api.srv.URL, "test-token"), "--kube-events-update-interval", "200ms", "--rate-limit", "off")
	wgetFails(t, r, app, 1)
	evs := waitEvents(t, api.snapshot, func(evs []apiEvent) bool { return len(evs) == 1 })
	checkPodEvent(t, evs[0], "shop", "client", pod.UID)

	wgetFails(t, r, app, 20)
	evs = waitEvents(t, api.snapshot, func(evs []apiEvent) bool { return len(evs) == 1 && evs[0].Series != nil && evs[0].Series.Count == 21 })
	t.Logf("after 21 failures: 1 Event, count %d", evs[0].Series.Count)

	// The API server goes away: failures are still traced at once, and
	// counted as dropped at stop.
	api.srv.Close()
	n := len(p.forComm("wget", 0))
	wgetFails(t, r, app, 3)
	if got := p.forComm("wget", 5*time.Second); len(got) < n+3 {
		t.Fatalf("with the API server down, %d wget events, want %d", len(got), n+3)
	}
	if c := p.stop(t); c["kube_events_dropped"] != 3 || c["kube_events_created"] != 1 {
		t.Errorf("totals %v: want 1 Event created and the 3 failures that reached none counted as dropped", c)
	}
}

func waitEvents(t *testing.T, get func() []apiEvent, ok func([]apiEvent) bool) []apiEvent {
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

func checkPodEvent(t *testing.T, e apiEvent, namespace, name, uid string) {
	t.Helper()
	if e.Regarding.Kind != "Pod" || e.Regarding.Name != name || e.Regarding.Namespace != namespace || e.Regarding.UID != uid ||
		e.Metadata.Namespace != namespace || e.Type != "Warning" || e.Reason != "EphemeralPortsExhausted" || e.Action != "Connect" ||
		e.ReportingController != "eaddr.io/eaddr" {
		t.Errorf("Event %+v, want a Warning EphemeralPortsExhausted on pod %s/%s uid %s", e, namespace, name, uid)
	}
	if !strings.HasPrefix(e.Note, "ephemeral ports exhausted toward 127.0.0.1:8080: 2 of 2 ports in 40000-40001 in use") ||
		!strings.Contains(e.Note, "Fix: ") {
		t.Errorf("note %q: want the verdict and the fix", e.Note)
	}
	t.Logf("Event %s/%s: %s %s: %s", e.Metadata.Namespace, e.Metadata.Name, e.Type, e.Reason, e.Note)
}
