package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// --errno: the default reports EAGAIN from UDP sockets only; NAME/udp is
// the one qualifier, and an errno given both ways is refused.
func TestErrnoFlag(t *testing.T) {
	c, err := traceConfigOf()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Tracer.Errnos, []int{99, 98, 11}) || !slices.Equal(c.Tracer.UDPOnly, []int{11}) {
		t.Errorf("default --errno: errnos %v, UDP only %v; want [99 98 11] and [11]", c.Tracer.Errnos, c.Tracer.UDPOnly)
	}
	c, err = traceConfigOf("--errno", "EAGAIN, 98/UDP")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Tracer.Errnos, []int{11, 98}) || !slices.Equal(c.Tracer.UDPOnly, []int{98}) {
		t.Errorf("--errno 'EAGAIN, 98/UDP': errnos %v, UDP only %v", c.Tracer.Errnos, c.Tracer.UDPOnly)
	}
	for _, bad := range []string{"EAGAIN/tcp", "EAGAIN,EAGAIN/udp", "EAGAIN/udp,EAGAIN", "/udp", "EAGAIN/"} {
		if _, err := traceConfigOf("--errno", bad); err == nil || !strings.Contains(err.Error(), "--errno") {
			t.Errorf("--errno %q: %v, want a usage error", bad, err)
		}
	}
}

// --help says what the default reports, as it is parsed above.
func TestErrnoFlagHelp(t *testing.T) {
	var f TraceFlags
	fs := pflag.NewFlagSet("trace", pflag.ContinueOnError)
	f.SetFlags(fs)
	fl := fs.Lookup("errno")
	if fl.DefValue != "EADDRNOTAVAIL,EADDRINUSE,EAGAIN/udp" || !strings.Contains(fl.Usage, "NAME/udp: only from UDP sockets") ||
		!strings.Contains(fl.Usage, "unix sockets' EAGAIN") {
		t.Errorf("--errno default %q, usage %q", fl.DefValue, fl.Usage)
	}
}
