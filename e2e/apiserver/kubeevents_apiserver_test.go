package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// The same against a real API server (internal/testing/kubetest: kube-apiserver and
// etcd): eaddr posts as its service account, with only the RBAC of
// deploy/kube-events/rbac.yaml; the Pod was created through the API
// (Pending: there is no kubelet) and the private containerd runs a pod with
// its UID. Exactly one Event appears on it, a storm makes its count grow,
// and the service account can do nothing else.
func TestKubeEventsAPIServer(t *testing.T) {
	s, uid, token := eaddrtest.APIServerWithPod(t)
	ctx := context.Background()

	r := critest.Start(t)
	_, app, ns := eaddrtest.ExhaustedPod(t, r, uid)
	p := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", strconv.FormatUint(ns.Inode(), 10), "--kube-events",
		"--kubeconfig", s.WriteKubeconfig(t, token), "--kube-events-update-interval", "200ms", "--rate-limit", "off", "--node", "node-a",
		"--metrics-addr", "127.0.0.1:0", "--ports-interval", "0") // no port warning: see TestKubeEvents
	metrics := p.MetricsURL(t)
	listEvents := func() []eaddrtest.APIEvent { return eaddrtest.ListEvents(t, s, "shop") }
	eaddrtest.WgetFails(t, r, app, 1)
	evs := eaddrtest.WaitEvents(t, listEvents, func(evs []eaddrtest.APIEvent) bool { return len(evs) >= 1 })
	time.Sleep(500 * time.Millisecond) // a second Event would have been made by now
	if evs = listEvents(); len(evs) != 1 {
		t.Fatalf("%d Events, want exactly 1: %+v", len(evs), evs)
	}
	eaddrtest.CheckPodEvent(t, evs[0], "shop", "client", uid)

	eaddrtest.WgetFails(t, r, app, 20)
	eaddrtest.WaitEvents(t, listEvents, func(evs []eaddrtest.APIEvent) bool {
		return len(evs) == 1 && evs[0].Series != nil && evs[0].Series.Count == 21
	})
	describe(t, s)

	// The service account may create and patch Events, and nothing else.
	for _, path := range []string{"/api/v1/namespaces/shop/pods", "/api/v1/namespaces/shop/events", "/api/v1/namespaces/kube-system/secrets"} {
		resp, err := s.Do(ctx, kubetest.Request{Method: "GET", Path: path, Token: token})
		if err != nil || resp.Status != http.StatusForbidden {
			t.Errorf("GET %s as eaddr's service account: %v %v, want 403", path, err, resp)
		}
	}
	if m := eaddrtest.ScrapeSums(t, metrics); m["eaddr_kube_events_dropped_total"] != 0 || m["eaddr_kube_event_calls_total"] < 2 {
		t.Errorf("with the API server up: dropped %v, calls %v", m["eaddr_kube_events_dropped_total"], m["eaddr_kube_event_calls_total"])
	}

	// The API server stops. A bind() in the pod that fails (busybox nc
	// listening on 8080, held by the exhauster's listener) is a new Event
	// that cannot be made: its failure is counted as dropped at once, and
	// the trace writes every event meanwhile.
	s.Stop()
	n := len(p.ForComm("wget", 0))
	eaddrtest.WgetFails(t, r, app, 3)
	if out, code := r.Exec(t, app, 20*time.Second, "nc", "-l", "-p", "8080"); code == 0 {
		t.Fatalf("nc -l -p 8080 succeeded: %s", out)
	}
	if got := p.ForComm("wget", 2*time.Second); len(got) != n+3 {
		t.Errorf("with the API server down, %d wget events, want %d", len(got), n+3)
	}
	deadline := time.Now().Add(15 * time.Second)
	for eaddrtest.ScrapeSums(t, metrics)["eaddr_kube_events_dropped_total"] < 1 {
		if time.Now().After(deadline) {
			t.Fatal("eaddr_kube_events_dropped_total still 0 15s after a failure whose Event could not be made")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// At stop, the 3 wget failures still waiting for their update are
	// counted too: 4 in all.
	if c := p.Stop(t); c["kube_events_created"] != 1 || c["kube_events_dropped"] != 4 {
		t.Errorf("totals %v: want 1 Event created, 4 failures dropped", c)
	}
}

// describe checks the Event in the core/v1 view of the API (what kubectl
// describe pod and kubectl get events read), then runs the real `kubectl
// describe pod client -n shop` (kubetest's kubectl, kubetest.Version) and
// checks that the excerpt README.md and docs/kubernetes.md quote is what it
// printed (describeExcerpt).
func describe(t *testing.T, s *kubetest.Server) {
	t.Helper()
	resp, err := s.Do(context.Background(), kubetest.Request{Method: "GET", Path: "/api/v1/namespaces/shop/events?fieldSelector=involvedObject.name%3Dclient"})
	if err != nil || resp.Err() != nil {
		t.Fatalf("core/v1 events: %v %v", err, resp.Err())
	}
	var l struct{ Items []coreEvent }
	if err := json.Unmarshal(resp.Body, &l); err != nil || len(l.Items) != 1 {
		t.Fatalf("core/v1 events of the pod: %v %s", err, resp.Body)
	}
	e := l.Items[0]
	if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != "client" || e.Reason != "EphemeralPortsExhausted" || e.Type != "Warning" ||
		e.ReportingComponent != "eaddr.io/eaddr" || e.ReportingInstance != "eaddr-node-a" || e.Series == nil || e.Series.Count != 21 {
		t.Errorf("core/v1 view %+v", e)
	}
	eaddrtest.DescribedAs(t, s, "EphemeralPortsExhausted", "../docs/kubernetes.md") // deploy/ is the working directory
}

// coreEvent is an Event as the core/v1 API shows it: what kubectl describe
// pod and kubectl get events read.
type coreEvent struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	InvolvedObject struct {
		Kind, Name, Namespace, UID string
	} `json:"involvedObject"`
	Reason, Message, Type, ReportingComponent, ReportingInstance string
	Series                                                       *struct {
		Count int `json:"count"`
	} `json:"series"`
}
