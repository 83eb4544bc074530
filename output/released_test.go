package output

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/tracer"
)

// A blocking connect that timed out from a released source port: the
// JSON has local_released and socket.cookie (valid against the schema),
// and a diagnosis's own meaning replaces the catalog's in explain.
func TestReleasedLocalAndCookie(t *testing.T) {
	var ev decode.Event
	decodeRecorded(t, "../testdata/events/connect-econnrefused-python3-ipv4.bin", &ev)
	var raw tracer.RawEvent
	raw.Flags = tracer.FlagSocket | tracer.FlagReleased
	raw.SockFamily, raw.LocalPort, raw.SockCookie = decode.AFInet, 30105, 4242
	copy(raw.LocalAddr[:], []byte{127, 0, 0, 1})
	var dec decode.Event
	decode.NewDecoder(nil).Decode(&raw, &dec)
	ev.Local, ev.LocalReleased, ev.SocketCookie = dec.Local, dec.LocalReleased, dec.SocketCookie
	ev.Errno = 110 // ETIMEDOUT
	x, err := explain.NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	var ex explain.Explanation
	x.Explain(&ev, &ex, false)
	var w Events
	g := &diagnose.Diagnosis{Verdict: "v", Meaning: "the reply was likely caught by a NodePort rule", At: bootZero}
	line := w.Append(nil, &ev, "node-a", &ex, g)
	testenv.ValidateLine(t, string(line))
	var m struct {
		Local struct {
			IP   string
			Port int
		} `json:"local"`
		LocalReleased bool                     `json:"local_released"`
		Socket        struct{ Cookie uint64 }  `json:"socket"`
		Explain       struct{ Meaning string } `json:"explain"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if m.Local.IP != "127.0.0.1" || m.Local.Port != 30105 || !m.LocalReleased || m.Socket.Cookie != 4242 {
		t.Errorf("local %+v released %v cookie %d: %s", m.Local, m.LocalReleased, m.Socket.Cookie, line)
	}
	if m.Explain.Meaning != g.Meaning {
		t.Errorf("meaning %q, want the diagnosis's", m.Explain.Meaning)
	}
	// Without the flag and cookie: neither field.
	raw.Flags, raw.SockCookie = tracer.FlagSocket, 0
	decode.NewDecoder(nil).Decode(&raw, &dec)
	if out := string(appendJSON(nil, &dec, "")); strings.Contains(out, "local_released") || strings.Contains(out, "cookie") {
		t.Errorf("%s", out)
	}
}
