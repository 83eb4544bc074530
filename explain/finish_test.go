package explain

import (
	"strings"
	"testing"
)

// Explain leaves an Explanation finished, and an Explanation reused for
// the next event says nothing left over from the last one: no line, no
// retries, no rule, no other wordings of a client it no longer names.
func TestExplainFinishesAndForgets(t *testing.T) {
	x, err := NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	var ex Explanation
	ev := recorded(t, x, "connect-eaddrnotavail-curl-ipv4", BinaryInfo{Runtime: runtimeGo, Libc: libcGo})
	x.Explain(ev, &ex, true)
	if ex.Client == nil || ex.Client.ID != "go" {
		t.Fatalf("client %v, want Go programs", ex.Client)
	}
	if !ex.HasClientMessage || len(ex.ClientMessage) == 0 || ex.Confidence == "" || ex.ClientUnknown != "" {
		t.Errorf("Go client: message %q (%v), confidence %q, client_unknown %q", ex.ClientMessage, ex.HasClientMessage, ex.Confidence, ex.ClientUnknown)
	}
	if !strings.HasPrefix(ex.Retries, "Go's dialer retries") || ex.RetryRule.Max != 3 || !ex.RetryRule.AnyThread {
		t.Errorf("Go client: retries %q, rule %+v; want the dialer's three tries from any thread", ex.Retries, ex.RetryRule)
	}
	if !ex.Full || len(ex.OtherWordings) < 10 || len(ex.Grep) != 1 {
		t.Errorf("full %v, %d other wordings, grep %q", ex.Full, len(ex.OtherWordings), ex.Grep)
	}

	ev = recorded(t, x, "connect-eaddrnotavail-curl-ipv4", BinaryInfo{Runtime: runtimeC, Libc: libcMusl})
	ev.ExeName, ev.Comm, ev.Args = []byte("myapp"), []byte("myapp"), []byte("myapp\x00")
	x.Explain(ev, &ex, false)
	if ex.Client != nil || ex.HasClientMessage || ex.ClientMessage != nil || ex.Confidence != "" {
		t.Errorf("unknown program: client %v, message %q (%v), confidence %q", ex.Client, ex.ClientMessage, ex.HasClientMessage, ex.Confidence)
	}
	if ex.Retries != "" || ex.RetryRule != (RetryRule{}) {
		t.Errorf("unknown program: retries %q, rule %+v left over", ex.Retries, ex.RetryRule)
	}
	if ex.Full || ex.OtherWordings != nil {
		t.Errorf("not asked for: full %v, %d other wordings", ex.Full, len(ex.OtherWordings))
	}
	if !strings.HasPrefix(ex.ClientUnknown, "no catalogued wording") || strings.Join(ex.Grep, "|") != "Address not available" {
		t.Errorf("unknown program: client_unknown %q, grep %q", ex.ClientUnknown, ex.Grep)
	}
}
