package explain

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/eaddr/eaddr/decode"
)

// Of a log, explain picks the line of a failure it is about, the most
// specific reading, the last of equals; a line that is only a number is
// no errno in a log.
func TestReadText(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	log := "2026-12-03 starting\n" +
		"1\n" + // a counter, not EPERM
		"ENOENT: /etc/app.conf\n" +
		"dial tcp 10.96.0.10:80: connect: connection refused\n" +
		"curl: (7) Failed to connect to 10.96.0.10 port 80 after 0 ms: Couldn't connect to server\n" +
		"\n" +
		"wget: can't connect to remote host (10.96.0.10): Address not available\n" +
		"Cannot assign requested address\n" +
		"done\n"
	r := c.ReadText(log, false)
	if r.Lines != 8 || r.Line != 7 || !reflect.DeepEqual(r.Recognised, []int{3, 4, 5, 7, 8}) {
		t.Errorf("lines %d, line %d, recognised %v; want 8, 7 (busybox wget: more specific than line 8's bare text), [3 4 5 7 8]", r.Lines, r.Line, r.Recognised)
	}
	if id := r.IDs[0]; id.Errno != decode.EADDRNOTAVAIL || id.Client == nil || id.Client.ID != "busybox-wget" || id.IP.String() != "10.96.0.10" {
		t.Errorf("line 7 read as %+v", id)
	}
	// Without an EADDRNOTAVAIL line, curl's (errno not in the text) comes
	// before a refused connect.
	r = c.ReadText("dial tcp 10.96.0.10:80: connect: connection refused\ncurl: (7) Couldn't connect to server\nx", false)
	if r.Line != 2 {
		t.Errorf("explains line %d, want 2 (curl)", r.Line)
	}
	// One line alone may be a number.
	if r := c.ReadText("99\n", false); r.Line != 1 || r.IDs[0].Errno != decode.EADDRNOTAVAIL {
		t.Errorf("99 alone: %+v", r)
	}
	if r := c.ReadText("hello\nworld", false); r.Line != 0 || r.Lines != 2 || r.Recognised != nil {
		t.Errorf("nothing to recognise: %+v", r)
	}
}

// A text cut at its bound may end inside an address: "10.96.0.1" of
// "10.96.0.10", port 8 of 80. An address that reaches the cut is not read;
// one that ends before it is, and so is any address of an uncut text.
func TestReadTextCut(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		cut  bool
		addr string // "" when no address is read
	}{
		{"connect EADDRNOTAVAIL 10.96.0.10:8", true, ""}, // Node's async wording ends with the address
		{"connect EADDRNOTAVAIL 10.96.0.10:8", false, "10.96.0.10:8"},
		{"dial tcp 10.96.0.10:8: connect: cannot assign requested address", true, "10.96.0.10:8"},
		{"Error: connect EADDRNOTAVAIL 10.96.0.10:80 - Local (0.0.0.0:0)\nconnect EADDRNOTAVAIL 10.96.0.1", true, "10.96.0.10:80"},
	} {
		r := c.ReadText(tc.text, tc.cut)
		if r.Line == 0 {
			t.Errorf("%q not recognised", tc.text)
			continue
		}
		id := r.IDs[0]
		addr := ""
		if id.IP.IsValid() {
			addr = netip.AddrPortFrom(id.IP, id.Port).String()
		}
		if addr != tc.addr {
			t.Errorf("%q (cut %v): address %q, want %q", tc.text, tc.cut, addr, tc.addr)
		}
	}
}
