package output

import (
	"strings"
	"testing"

	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/termtext"
)

// seedLine is what the pod printed.
const seedLine = "wget: can't connect to remote host (1.1.1.1): Address not available"

func explainText(t *testing.T, in string, o ExplainText) []string {
	t.Helper()
	x, err := explain.NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	ids := x.Catalog.Identify(in)
	if len(ids) == 0 {
		t.Fatalf("%q not recognised", in)
	}
	var b strings.Builder
	WriteExplainText(&b, x.NewReport(ids), o)
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// The answer comes first: the errno and its meaning, who printed it, the
// causes, then a command that confirms the cause in the pod's own netns,
// within the first 25 lines; the table of other wordings only with Full.
func TestExplainTextAnswerFirst(t *testing.T) {
	lines := explainText(t, seedLine, ExplainText{Width: 120})
	order := []string{"EADDRNOTAVAIL (99) in connect():", "printed by busybox wget, with musl's", "likely causes", "nsenter -t PID -n ss -Htan dst 1.1.1.1 "}
	at := 0
	for i, l := range lines {
		if at < len(order) && strings.Contains(l, order[at]) {
			if at == len(order)-1 && i >= 25 {
				t.Errorf("the first command to confirm is line %d, not within the first 25", i+1)
			}
			at++
		}
	}
	if at < len(order) {
		t.Errorf("no %q after %q:\n%s", order[at], order[max(at-1, 0)], strings.Join(lines, "\n"))
	}
	all := strings.Join(lines, "\n")
	if strings.Contains(all, "other words") || strings.Contains(all, "Cannot assign requested address") {
		t.Errorf("the wordings table without --full:\n%s", all)
	}
	full := strings.Join(explainText(t, seedLine, ExplainText{Width: 120, Full: true}), "\n")
	if i, j := strings.Index(full, "nsenter"), strings.Index(full, "the same failure in other words"); i < 0 || j < i {
		t.Errorf("--full: the wordings are not after the commands:\n%s", full)
	}
}

// No line is wider than the width, for any kind of answer, --full too.
func TestExplainTextFits(t *testing.T) {
	for _, in := range []string{
		seedLine,
		"Cannot assign requested address",
		"curl: (7) Failed to connect to 10.96.0.10 port 443 after 3 ms: Could not connect to server",
		"listen tcp :8080: bind: address already in use",
		"nc: bind: Address in use",
		"无法指定被请求的地址",
		"upstream connect error or disconnect/reset before headers. reset reason: connection failure, transport failure reason: immediate connect error: Cannot assign requested address",
		"ECONNREFUSED",
		"ENOBUFS",
	} {
		for _, width := range []int{120, 100, 80} {
			for _, full := range []bool{false, true} {
				for _, l := range explainText(t, in, ExplainText{Width: width, Full: full}) {
					if w := termtext.Columns(l); w > width {
						t.Errorf("%q at %d columns (full %v): a line of %d: %q", in, width, full, w, l)
					}
				}
			}
		}
	}
}

// What explain echoes of its input is made safe: a log line that moves the
// cursor or sets the clipboard is shown, not obeyed.
func TestExplainEchoSafe(t *testing.T) {
	var b strings.Builder
	WriteExplainInput(&b, &ExplainInput{Lines: 3, Line: 2, Recognised: []int{2}, Echo: "wget: \x1b]52;c;aGk=\x07 \u202e\x1b[2J"}, 120)
	WriteExplainNotRecognised(&b, "\x1b[31mred\u2028", 0, false, nil, 120)
	if out := b.String(); strings.ContainsAny(out, "\x1b\x07\u202e\u2028") {
		t.Errorf("raw control or bidi characters reach the terminal: %q", out)
	}
}
