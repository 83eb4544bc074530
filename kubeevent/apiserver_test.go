package kubeevent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// The real API server (internal/testing/kubetest: kube-apiserver and etcd) takes
// the Event whose note is hostileNote, cleaned and cut, and keeps that
// note as sent; the same Event with the note raw it refuses (422: 1,289
// bytes once its JSON decoding made U+FFFD of each byte that is not UTF-8),
// which is what eaddr sent before notes were cleaned.
func TestHostileNoteAPIServer(t *testing.T) {
	s := kubetest.Start(t)
	c, err := FromKubeconfig(s.WriteKubeconfig(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := Failure{PodUID: "0f6c6c5e-8a3b-4c3e-9b39-5b1d8c0f2a11", PodName: "client", Namespace: "default", Reason: ReasonExhausted,
		Action: "Connect", Dest: netip.MustParseAddrPort("10.96.0.10:80"), Verdict: hostileNote(), Count: 1}

	at := time.Now()
	raw := newEvent(&f, "eaddr-node-a", at)
	raw.Metadata.Name += "-raw"
	raw.Note = f.note()
	b, err := json.Marshal(&raw)
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *APIError
	err = c.do(ctx, "POST", eventsPath(f.Namespace), "application/json", b, nil)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity {
		t.Errorf("the raw note (%d bytes, %d at the API server): %v, want 422", len(raw.Note), serverLen(t, raw.Note), err)
	}

	name, err := c.create(ctx, &f, f.note(), "eaddr-node-a", at)
	if err != nil {
		t.Fatalf("the cleaned note: %v", err)
	}
	resp, err := s.Do(ctx, kubetest.Request{Method: "GET", Path: eventsPath(f.Namespace) + "/" + name})
	if err == nil {
		err = resp.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	var got event
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	want := cleanNote(f.note(), noteMax)
	if got.Note != want {
		t.Errorf("the API server keeps the note\n%q\nwant\n%q", got.Note, want)
	}
	checkNote(t, f.note(), got.Note, noteMax)
	t.Logf("a note of %d bytes (%d at the API server raw) sent as %d: %.120q...", len(f.note()), serverLen(t, f.note()), len(got.Note), got.Note)
}
