package output

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A timeout whose SYNs the node's SNAT dropped: the diagnosis's
// node_layer, valid against the schema, with every field; a pod named by
// its address; and one with no drop (beyond the node) has drops 0 alone.
func TestNodeLayerJSON(t *testing.T) {
	var ev decode.Event
	decodeRecorded(t, "../testdata/events/connect-econnrefused-python3-ipv4.bin", &ev)
	ev.Errno = 110
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	n := &diagnose.NodeLayer{Drops: 3, First: at, NetNS: 4026532303, InDevice: "pod2", Reason: "NETFILTER_DROP", Where: "nf_hook_slow",
		CountersKnown: true, InsertFailed: 3, CTDrop: 3, WatchingSince: at.Add(-time.Minute),
		Conntrack: &diagnose.ConntrackUse{Count: 6, Max: 262144},
		SNAT: &diagnose.SNATUse{Egress: netip.MustParseAddrPort("198.18.0.1:40003"), Dst: netip.MustParseAddrPort("[fd00:ea::2]:8080"), Entries: 4, Lo: 40000, Hi: 40003,
			Rule: "nft table inet eaddr_lab chain post", RandomFully: true,
			Holders: []diagnose.SNATHolder{{Addr: netip.MustParseAddr("10.98.1.2"), Entries: 4, Pod: &decode.Pod{UID: "u", Name: "web", Namespace: "default"}}, {Addr: netip.MustParseAddr("10.98.2.2"), Entries: 1}}}}
	g := &diagnose.Diagnosis{Verdict: "the node's SNAT ran out", Cause: diagnose.CauseNodeSNAT, Node: n, Fix: []string{"widen"}, At: at}
	var w Events
	line := w.Append(nil, &ev, "node-a", nil, g)
	testenv.ValidateLine(t, string(line))
	var m struct {
		Diagnosis struct {
			Cause string
			Node  map[string]any `json:"node_layer"`
		}
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	snat, _ := m.Diagnosis.Node["snat"].(map[string]any)
	if m.Diagnosis.Cause != "node_snat" || m.Diagnosis.Node["insert_failed"] != 3.0 || snat["port_range"] != "40000-40003" || len(snat["holders"].([]any)) != 2 {
		t.Errorf("node_layer: %s", line)
	}
	beyond := &diagnose.Diagnosis{Verdict: "the SYNs left the node", Cause: diagnose.CauseBeyondNode, Node: &diagnose.NodeLayer{WatchingSince: at}, At: at}
	line = w.Append(nil, &ev, "node-a", nil, beyond)
	testenv.ValidateLine(t, string(line))
	if !strings.Contains(string(line), `"node_layer":{"drops":0,"watching_since":"2026-12-06T08:00:00Z"}`) {
		t.Errorf("beyond the node: %s", line)
	}
}
