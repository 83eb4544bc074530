package kubeevent

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAPI records the Events created and the series patched, like the API
// server's events.k8s.io/v1 endpoints; down makes it answer 503, and a
// non-nil hold makes every request wait until it is closed.
type fakeAPI struct {
	mu      sync.Mutex
	created []event
	patches []string
	down    bool
	delay   time.Duration
	hold    chan struct{}
	held    atomic.Int64 // requests that waited on hold
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hold != nil {
		f.held.Add(1)
		<-f.hold
	}
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	b, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/events"):
		var e event
		if err := json.Unmarshal(b, &e); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f.created = append(f.created, e)
		w.Write(b)
	case r.Method == "PATCH" && r.Header.Get("Content-Type") == "application/merge-patch+json":
		f.patches = append(f.patches, r.URL.Path+" "+string(b))
		w.Write([]byte("{}"))
	default:
		http.Error(w, r.Method+" "+r.URL.Path, 404)
	}
}

func (f *fakeAPI) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.created), len(f.patches)
}

func newFake(t *testing.T) (*fakeAPI, *Client) {
	f := &fakeAPI{}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	return f, &Client{Server: srv.URL, HTTP: srv.Client(), token: "t"}
}

func failure(uid string, at time.Time) Failure {
	return Failure{PodUID: uid, PodName: "web-" + uid, Namespace: "shop", Reason: ReasonExhausted, Action: "Connect",
		Dest: netip.MustParseAddrPort("10.96.0.10:80"), Verdict: "ephemeral ports exhausted toward 10.96.0.10:80", Count: 1, At: at}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A storm of one pod's failures is one Event whose series counts them,
// within the call budget; another pod gets its own Event.
func TestReporterAggregates(t *testing.T) {
	f, c := newFake(t)
	r := New(c, Options{Instance: "eaddr-node-a", UpdateEvery: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	now := time.Now()
	for i := 0; i < 500; i++ {
		r.Report(failure("a", now.Add(time.Duration(i)*time.Millisecond)))
	}
	r.Report(failure("b", now))
	// Until the reporter has the answer to the patch of the storm's whole
	// count: a stop while a call waits for its answer cancels it, and that
	// call counts as failed (Errors) though the server applied it, which a
	// slow machine makes likely and a fast one rare (seen 2 in 20 under
	// -race on a loaded machine).
	waitFor(t, "two Events and the count 500, answered", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		s := r.Stats()
		return s.Created == 2 && len(f.patches) >= 1 && s.Updated == uint64(len(f.patches)) &&
			strings.Contains(f.patches[len(f.patches)-1], `"count":500`)
	})
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.created[0]
	if e.Regarding.Kind != "Pod" || e.Regarding.UID == "" || e.Type != "Warning" || e.Reason != ReasonExhausted ||
		e.ReportingController != Controller || e.ReportingInstance != "eaddr-node-a" || e.EventTime == "" {
		t.Errorf("Event %+v", e)
	}
	last := f.patches[len(f.patches)-1]
	if !strings.Contains(last, `"count":500`) {
		t.Errorf("last update %s, want the count 500", last)
	}
	if s := r.Stats(); s.Dropped != 0 || s.Created != 2 || s.Errors != 0 {
		t.Errorf("stats %+v", s)
	}
	if n := len(f.patches); n > 10 {
		t.Errorf("%d updates for one storm: the budget did not hold", n)
	}
}

// With the API server down, Report never waits and every failure is
// counted as dropped; with it slow, the queue fills and drops are counted.
// The reporter is first made to wait in a call the API server does not
// answer; then 1000 Reports must return: had one of them waited for the
// reporter, they would never return (a minute fails that).
func TestReporterAPIDown(t *testing.T) {
	f, c := newFake(t)
	f.down = true
	f.hold = make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(f.hold)
		}
	}
	defer release()
	r := New(c, Options{Queue: 8})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Report(failure("a", time.Now()))
	waitFor(t, "the reporter waiting on the API server", func() bool { return f.held.Load() > 0 })
	reported := make(chan struct{})
	go func() {
		for i := 0; i < 1000; i++ {
			r.Report(failure("a", time.Now()))
		}
		close(reported)
	}()
	select {
	case <-reported:
	case <-time.After(time.Minute):
		t.Fatal("1000 Reports did not return while the API server answered nothing: Report waited")
	}
	release()
	waitFor(t, "a failed create", func() bool { return r.Stats().Errors > 0 })
	cancel()
	<-done
	if s := r.Stats(); s.Dropped != 1001 || s.Created != 0 {
		t.Errorf("stats %+v: want all 1001 dropped", s)
	}
}

// Port warnings that reach no Event are counted apart from failures: they
// are samples, not failed calls, and eaddr_kube_events_dropped_total
// counts failures only. With the API server down, 3 warnings of one pod and
// 2 failures of another are 3 warnings and 2 failures dropped; 2 node SNAT
// warnings of a third pod are 2 more warnings; a warning of a pod whose
// name is not known is one more.
func TestReporterWarningsCountedApart(t *testing.T) {
	f, c := newFake(t)
	f.down = true
	r := New(c, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	for i := 0; i < 3; i++ {
		w := failure("a", time.Now())
		w.Reason, w.Action = ReasonNearlyExhausted, "SamplePorts"
		r.Report(w)
	}
	r.Report(failure("b", time.Now()))
	r.Report(failure("b", time.Now()))
	for i := 0; i < 2; i++ {
		w := failure("c", time.Now())
		w.Reason, w.Action = ReasonNodeSNATNearlyExhausted, "SampleNodeSNAT"
		r.Report(w)
	}
	r.UnnamedWarning()
	waitFor(t, "the three creates failed", func() bool { return r.Stats().Errors >= 3 })
	cancel()
	<-done
	if s := r.Stats(); s.Dropped != 2 || s.WarningsDropped != 6 || s.Unnamed != 0 {
		t.Errorf("stats %+v: want 2 failures and 6 warnings dropped", s)
	}
}

// A port warning of a pod whose failures toward the same destination have
// an Event already adds nothing: one Event, nothing counted as dropped. A
// warning toward another destination is its own Event.
func TestReporterWarningAfterFailure(t *testing.T) {
	f, c := newFake(t)
	r := New(c, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Report(failure("a", time.Now()))
	warn := failure("a", time.Now())
	warn.Reason = ReasonNearlyExhausted
	r.Report(warn)
	other := warn
	other.Dest = netip.MustParseAddrPort("10.96.0.11:80")
	r.Report(other)
	waitFor(t, "two Events", func() bool { return r.Stats().Created == 2 })
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.created) != 2 || f.created[0].Reason == f.created[1].Reason {
		t.Errorf("Events %+v, want the failure's and the other destination's warning", f.created)
	}
	if s := r.Stats(); s.Dropped != 0 || s.WarningsDropped != 0 {
		t.Errorf("stats %+v: nothing was lost", s)
	}
}

// A kubeconfig's current context gives the server and the token; one
// without credentials, or with an exec plugin only, is refused with why.
func TestFromKubeconfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("token", "from-file\n")
	good := write("good", `apiVersion: v1
kind: Config
current-context: b
contexts: [{name: a, context: {cluster: x, user: x}}, {name: b, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443/", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {tokenFile: token}}]
`)
	c, err := FromKubeconfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := c.bearer(); c.Server != "https://10.0.0.1:6443" || tok != "from-file" || err != nil {
		t.Errorf("server %q, token %q %v", c.Server, tok, err)
	}
	execOnly := write("exec", `current-context: b
contexts: [{name: b, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {}}]
`)
	if _, err := FromKubeconfig(execOnly); err == nil || !strings.Contains(err.Error(), "exec and auth-provider plugins are not supported") {
		t.Errorf("a user without credentials: %v", err)
	}
}

// In a pod: the API server from KUBERNETES_SERVICE_HOST/PORT, trusted by
// the mounted CA, and the mounted token, read again for each call (bound
// tokens rotate).
func TestInCluster(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer srv.Close()
	dir := t.TempDir()
	old := saDir
	saDir = dir
	defer func() { saDir = old }()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(dir+"/ca.crt", caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	if err := os.WriteFile(dir+"/token", []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := InCluster()
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"first", "rotated"} {
		if err := os.WriteFile(dir+"/token", []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f := failure("a", time.Now())
		if _, err := c.create(context.Background(), &f, f.note(), "eaddr-node-a", time.Now()); err != nil {
			t.Fatalf("create through the mounted CA: %v", err)
		}
	}
	if strings.Join(auth, ",") != "Bearer first,Bearer rotated" {
		t.Errorf("Authorization headers %q: want the token as mounted at each call", auth)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := InCluster(); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("outside a pod: %v", err)
	}
}
