package output

import (
	"fmt"
	"strings"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/termtext"
)

// CulpritLines is a warned destination's culprit for a person (check's
// table, top's rows), each line at most width columns and safe: who holds
// its ports (pid, comm and pod), then each fix, wrapped at spaces under
// its label; or why eaddr cannot say.
func CulpritLines(c *diagnose.Culprit, indent string, width int) []string {
	if c.Unknown != "" {
		return Hanging(indent+"holders and fix not known: ", c.Unknown, width)
	}
	held := c.NoHolder
	if len(c.Holders) > 0 {
		held = holdersWords(c.Holders)
	}
	out := Hanging(indent+"held by: ", held, width)
	for _, f := range c.Fix {
		out = append(out, Hanging(indent+"fix: ", f, width)...)
	}
	return out
}

// holdersWords: "pid 7 (nc) with 3 sockets, pid 9 (java) in pod ns/web-0
// with 2 sockets"; the pod by its UID when the runtime does not name it.
func holdersWords(hs []diagnose.CulpritHolder) string {
	parts := make([]string, 0, len(hs))
	for _, h := range hs {
		s := fmt.Sprintf("pid %d (%s)", h.PID, h.Comm)
		switch {
		case h.Pod != nil && h.Pod.Name != "":
			s += " in pod " + h.Pod.Namespace + "/" + h.Pod.Name
		case h.PodUID != "":
			s += " in pod uid " + h.PodUID
		}
		parts = append(parts, fmt.Sprintf("%s with %d socket%s", s, h.Sockets, plural(h.Sockets)))
	}
	return strings.Join(parts, ", ")
}

// Hanging wraps s (raw: it is made safe) after the label first, the lines
// after the first indented under s's start: at most width columns each, as
// the human form of a failure wraps its prose (appendWrapped: a quoted
// value is not broken). Text that fits on one line keeps its spacing. The
// label is eaddr's own ASCII.
func Hanging(first, s string, width int) []string {
	if termtext.Width(s) <= width-len(first) {
		return []string{first + termtext.String(s)}
	}
	b := appendWrapped(append([]byte(nil), first...), s, len(first), len(first), width)
	return strings.Split(string(b), "\n")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
