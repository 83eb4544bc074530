package output

import (
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/termtext"
)

// humanScene is a failure as a person would see it: busybox wget in a named
// pod (a recorded event, sent to 1.1.1.1:443), explained as the catalog
// explains it in an Alpine image, with a diagnosis whose verdict and
// fixes are longer than a line.
func humanScene(t testing.TB) (*decode.Event, *explain.Explanation, *diagnose.Diagnosis) {
	t.Helper()
	ev := new(decode.Event)
	decodeRecorded(t, "../testdata/events/connect-eaddrnotavail-busybox-wget-ipv4.bin", ev)
	ev.Pod = &decode.Pod{UID: "0f3c2a4e-8d1b-4c6f-9a7e-2b5d8c1e4f60", Name: "web-7d9f8b6c5-x2x4q", Namespace: "shop", Container: "web"}
	ev.Remote.IP = netip.MustParseAddrPort("1.1.1.1:443")
	ex := &explain.Explanation{
		Client:           &explain.Client{Name: "busybox wget"},
		Binary:           &explain.BinaryInfo{Runtime: "busybox", Libc: "musl"},
		ClientMessage:    []byte("wget: can't connect to remote host (1.1.1.1): Address not available"),
		HasClientMessage: true,
		Confidence:       "exact",
	}
	g := &diagnose.Diagnosis{
		Verdict: "ephemeral ports exhausted toward 1.1.1.1:443: none of the 28232 ports of 32768-60999 is free: 28232 held by open connections, held by pid 4242 python3",
		Fix: []string{
			"pid 4242 (python3) holds 28232 connections to this destination: reuse connections (HTTP keep-alive, a connection pool) instead of opening new ones",
			`widen the pod's range: spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}] (1024 keeps clear of privileged ports)`,
		},
	}
	return ev, ex, g
}

// lines splits rendered output and checks what every human form promises:
// no line wider than width, nothing a terminal would act on.
func lines(t *testing.T, out string, width int) []string {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("output does not end with a newline: %q", out)
	}
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range ls {
		if !utf8.ValidString(l) {
			t.Errorf("line is not valid UTF-8: %q", l)
		}
		for _, r := range l {
			if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
				t.Errorf("line holds %U, which a terminal acts on: %q", r, l)
			}
		}
		if w := termtext.Columns(l); w > width {
			t.Errorf("line of %d columns, over %d:\n%s", w, width, l)
		}
	}
	return ls
}

// columns counts a safe line's columns as a terminal shows them.
func columns(l string) int {
	return termtext.Width(strings.ReplaceAll(l, `\`, "")) + strings.Count(l, `\`)
}

// unwrap joins a labelled value and its continuation lines back into one,
// spaces between words made one.
func unwrap(ls []string, i int) string {
	s := ls[i]
	for j := i + 1; j < len(ls) && strings.HasPrefix(ls[j], strings.Repeat(" ", 6)) && strings.TrimSpace(ls[j][:9]) == ""; j++ {
		s += " " + ls[j]
	}
	return strings.Join(strings.Fields(s), " ")
}

func TestHumanText(t *testing.T) {
	ev, x, g := humanScene(t)
	for _, width := range []int{120, 80, 60} {
		h := Human{Width: func() int { return width }, Loc: time.FixedZone("XYZ", 3600)}
		out := string(h.AppendText(nil, ev, x, g))
		ls := lines(t, out, width)
		t.Logf("width %d:\n%s", width, out)
		if who := unwrap(ls, 0); !strings.Contains(who, " XYZ pod shop/web-7d9f8b6c5-x2x4q container web · pid ") || !strings.HasSuffix(who, " busybox") {
			t.Errorf("first line does not say when (with the zone) and who: %q", who)
		}
		want := map[string]string{
			"failed": "failed connect() to 1.1.1.1:443: EADDRNOTAVAIL",
			"client": "client busybox wget (musl) printed: wget: can't connect to remote host (1.1.1.1): Address not available",
			"cause":  "cause " + g.Verdict,
		}
		fixes := 0
		for i, l := range ls {
			f := strings.Fields(l)
			if len(f) == 0 || !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "   ") {
				continue
			}
			got := unwrap(ls, i)
			if f[0] == "fix" {
				if want := "fix " + g.Fix[fixes]; got != want {
					t.Errorf("width %d: fix %d reads\n%q, want\n%q", width, fixes, got, want)
				}
				fixes++
				continue
			}
			if w, ok := want[f[0]]; ok && got != w {
				t.Errorf("width %d: %s reads\n%q, want\n%q", width, f[0], got, w)
			}
			delete(want, f[0])
		}
		if len(want) > 0 || fixes != len(g.Fix) {
			t.Errorf("width %d: lines missing %v, %d of %d fixes", width, want, fixes, len(g.Fix))
		}
		if !strings.Contains(out, `"1024 65535"`) {
			t.Errorf("width %d: the quoted value of the command was split over two lines", width)
		}
	}
}

// Text from a workload (comm, pod, container, a unix path) reaches the
// terminal escaped, in every human form.
func TestHumanHostileText(t *testing.T) {
	ev, x, g := humanScene(t)
	ev.Comm = []byte("\x1b]52;c;aGk=\x07")
	ev.Pod.Name = "web\u202egpj.exe"
	ev.Pod.Container = "c\xc2\x9b2J"
	g.Verdict = "held by pid 7 \x1b[2J"
	h := Human{Width: func() int { return 120 }}
	for name, out := range map[string]string{
		"text":  string(h.AppendText(nil, ev, x, g)),
		"table": string(h.AppendRow(nil, ev, x, g)),
	} {
		lines(t, out, 120)
		for _, want := range []string{`\x1b]52;c;aGk=\x07`, `\x1b[2J`} {
			if !strings.Contains(out, want) && !(name == "table" && want == `\x1b]52;c;aGk=\x07`) {
				t.Errorf("%s: %q not shown escaped:\n%s", name, want, out)
			}
		}
		if name == "text" && (!strings.Contains(out, `web\u202egpj.exe`) || !strings.Contains(out, `c\u009b2J`)) {
			t.Errorf("text: pod or container not escaped:\n%s", out)
		}
	}
}

func TestHumanWho(t *testing.T) {
	ev, x, g := humanScene(t)
	h := Human{Width: func() int { return 120 }}
	for _, c := range []struct {
		pod        *decode.Pod
		unresolved string
		host       bool
		text, cell string
	}{
		{ev.Pod, "", false, "pod shop/web-7d9f8b6c5-x2x4q container web", "shop/web-7d9f8b6c5-x2x4q"},
		{ev.Pod, "the runtime did not answer", false, "pod uid 0f3c2a4e-8d1b-4c6f-9a7e-2b5d8c1e4f60 (not named by the runtime)", "0f3c2a4e-8d1b-4c6f-9a7e-2b5d8c1e4f60"},
		{&decode.Pod{UID: "0123"}, "", false, "pod uid 0123 (not named by the runtime)", "0123"},
		{nil, "", true, "host network", "(host)"},
		{nil, "", false, "netns 4026531840", "netns:4026531840"},
	} {
		ev.Pod, ev.PodNamesUnresolved, ev.HostNetwork, ev.NetNS = c.pod, c.unresolved, c.host, 4026531840
		text := strings.SplitN(string(h.AppendText(nil, ev, x, g)), "\n", 2)[0]
		if !strings.Contains(text, " "+c.text+" · pid ") {
			t.Errorf("pod %+v: first line %q lacks %q", c.pod, text, c.text)
		}
		row := strings.SplitN(string(h.AppendRow(nil, ev, x, g)), "\n", 2)[0]
		if got := strings.TrimSpace(row[strings.Index(TableHeader, "POD"):]); got != c.cell {
			t.Errorf("pod %+v: POD column %q, want %q", c.pod, got, c.cell)
		}
	}
}

func TestTableRow(t *testing.T) {
	ev, x, g := humanScene(t)
	for _, width := range []int{120, 100} {
		h := Human{Width: func() int { return width }}
		out := string(h.AppendRow(nil, ev, x, g))
		ls := lines(t, out, width)
		t.Logf("\n%s\n%s", TableHeader, out)
		for col, want := range map[string]string{"CALL": "connect", "ERRNO": "EADDRNOTAVAIL", "COMM": "busybox", "ADDRESS": "1.1.1.1:443", "POD": "shop/web-"} {
			if i := strings.Index(TableHeader, col); !strings.HasPrefix(ls[0][i:], want) {
				t.Errorf("width %d: column %s reads %q, want %q", width, col, ls[0][i:], want)
			}
		}
		joined := strings.Join(strings.Fields(out), " ")
		for _, f := range g.Fix {
			if !strings.Contains(joined, "→ fix: "+f) {
				t.Errorf("width %d: the table does not show the fix %q", width, f)
			}
		}
		if !strings.Contains(joined, "⚑ "+g.Verdict) {
			t.Errorf("width %d: the table does not show the cause", width)
		}
	}
}

// The human forms are written per event: into a reused buffer they
// allocate nothing.
func TestHumanDoesNotAllocate(t *testing.T) {
	ev, x, g := humanScene(t)
	h := Human{Width: func() int { return 100 }, Loc: time.UTC}
	buf := h.AppendText(nil, ev, x, g)
	buf = h.AppendRow(buf, ev, x, g)
	if n := testing.AllocsPerRun(500, func() { buf = h.AppendText(buf[:0], ev, x, g) }); n != 0 {
		t.Errorf("AppendText allocates %v times", n)
	}
	if n := testing.AllocsPerRun(500, func() { buf = h.AppendRow(buf[:0], ev, x, g) }); n != 0 {
		t.Errorf("AppendRow allocates %v times", n)
	}
}
