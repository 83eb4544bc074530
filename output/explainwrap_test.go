package output

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/termtext"
)

// Wrapped prose keeps every word, in order, and no line is wider than the
// width, CJK (two columns a character) included; a word wider than a line
// is cut where the line ends.
func TestWrapText(t *testing.T) {
	texts := []string{
		"ephemeral ports exhausted toward one destination: many ESTABLISHED connections (no reuse / keep-alive) or many TIME_WAIT sockets from short connections",
		"无法指定被请求的地址 无法指定被请求的地址 无法指定被请求的地址 无法指定被请求的地址 无法指定被请求的地址",
		"a " + strings.Repeat("x", 300) + " b",
	}
	for _, width := range []int{120, 80, 60} {
		for _, s := range texts {
			var b strings.Builder
			wrapText(&b, width, "  1. ", "     ", s)
			out := strings.TrimSuffix(b.String(), "\n")
			for _, l := range strings.Split(out, "\n") {
				if w := termtext.Columns(l); w > width {
					t.Errorf("width %d: %d columns: %q", width, w, l)
				}
			}
			joined := strings.Join(strings.Fields(strings.ReplaceAll(out, "1. ", "")), "")
			if joined != strings.Join(strings.Fields(s), "") {
				t.Errorf("width %d: words lost or changed:\n%s", width, out)
			}
		}
	}
}

// A wrapped command pastes back into the same command: lines ended by " \"
// continue on the next, a quoted part is never broken, an option keeps its
// value where they fit a line together, and no line is wider than the
// width.
func TestWrapCommand(t *testing.T) {
	const debug = "kubectl debug node/NODE -it --profile=sysadmin --image=localhost/eaddr:TAG --image-pull-policy=Never --"
	for _, tc := range []struct{ prefix, run string }{
		{"nsenter -t PID -n", "ss -Htan dst 1.1.1.1 | awk '{print $5, $1}' | sort | uniq -c | sort -rn | head"},
		{debug, "/eaddr trace --errno EADDRNOTAVAIL --cri-endpoint /host/run/containerd/containerd.sock --namespace NAMESPACE --pod POD"},
		{debug, "/eaddr check --netns NETNS"},
		{"", "kubectl get endpointslices -l kubernetes.io/service-name=NAME"},
	} {
		whole := strings.TrimSpace(tc.prefix + " " + tc.run)
		for width := 48; width <= 124; width += 4 { // below 48 the socket's path fits no line
			var b strings.Builder
			wrapCommand(&b, width, "  ", tc.prefix, tc.run)
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			var words []string
			for i, l := range lines {
				if w := termtext.Columns(l); w > width {
					t.Errorf("width %d: %d columns: %q", width, w, l)
				}
				if strings.Count(l, "'")%2 != 0 {
					t.Errorf("width %d: %q breaks a quoted word", width, l)
				}
				cont := strings.HasSuffix(l, " \\")
				if cont != (i < len(lines)-1) {
					t.Errorf("width %d: line %d %q: a continuation where none follows, or none where one does", width, i, l)
				}
				words = append(words, shellSplit(strings.TrimSuffix(l, " \\"))...)
				// Below 60 columns --cri-endpoint and its socket's path fit no line together.
				if f := strings.Fields(l); width >= 60 && len(f) > 1 && cont && strings.HasPrefix(f[len(f)-2], "--") && f[len(f)-2] != "--" && !strings.Contains(f[len(f)-2], "=") {
					t.Errorf("width %d: %q ends with an option without its value", width, l)
				}
			}
			if !reflect.DeepEqual(words, shellSplit(whole)) {
				t.Errorf("width %d: pasted back, %q is not %q:\n%s", width, strings.Join(words, " "), whole, b.String())
			}
		}
	}
}
