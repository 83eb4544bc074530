package output

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
)

// ExplainText says how WriteExplainText writes.
type ExplainText struct {
	Width int  // terminal columns: no line is wider
	Full  bool // also the full meaning, the client's notes and every other wording
}

// WriteExplainText writes what `eaddr explain` says of r, for a person, the
// answer first: the errno and what it means, who printed the words, the
// likely causes, then the commands that confirm the cause.
func WriteExplainText(w io.Writer, r *explain.Report, o ExplainText) {
	t := textOut{w: w, width: max(o.Width, minWidth)}
	t.headline(r)
	t.printedBy(r)
	if r.Meaning != nil && len(r.Meaning.Causes) > 0 {
		t.blank()
		t.line("likely causes, most likely first:")
		for i, c := range r.Meaning.Causes {
			n := strconv.Itoa(i+1) + ". "
			t.wrap("  "+n, strings.Repeat(" ", 2+len(n)), c)
		}
	}
	t.confirm(r)
	if o.Full {
		t.details(r)
	} else if more := fullAdds(r); more != "" {
		t.blank()
		t.wrap("", "", "eaddr explain --full adds "+more+".")
	}
}

// fullAdds says what --full would add to r's answer; "" for nothing.
func fullAdds(r *explain.Report) string {
	var parts []string
	if r.Meaning != nil && r.Meaning.Meaning != r.Summary {
		parts = append(parts, "the whole meaning")
	}
	if r.ID.Client != nil {
		parts = append(parts, "the notes on the words of "+r.ID.Client.Name)
	}
	if len(r.Other) > 0 {
		parts = append(parts, fmt.Sprintf("the same failure in %d other wordings to grep for", len(r.Other)))
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	return strings.Join(parts, "")
}

// textOut writes wrapped lines of at most width columns.
type textOut struct {
	w     io.Writer
	width int
}

func (t textOut) line(s string)              { io.WriteString(t.w, s+"\n") }
func (t textOut) blank()                     { t.line("") }
func (t textOut) wrap(first, rest, s string) { wrapText(t.w, t.width, first, rest, s) }

// headline: the errno, the call and what it means; or that the text does
// not carry the errno.
func (t textOut) headline(r *explain.Report) {
	n := r.ID.Errno
	if n == 0 {
		t.wrap("", "  ", "errno not in the text: "+r.Summary)
		return
	}
	head := fmt.Sprintf("%s (%d) in %s()", decode.ErrnoName(n), n, r.Syscall)
	if r.SysGuess {
		head = fmt.Sprintf("%s (%d), most likely in %s() (the text does not say)", decode.ErrnoName(n), n, r.Syscall)
	}
	summary := r.Summary
	if summary == "" {
		summary = "eaddr's catalog does not explain this errno."
	}
	t.wrap("", "  ", head+": "+summary)
}

// printedBy: the client and libc whose words the text is.
func (t textOut) printedBy(r *explain.Report) {
	id := &r.ID
	var s string
	switch {
	case id.Client != nil:
		s = "printed by " + id.Client.Name
		if words := libcWords(id.Libc); words != "" && id.Libc != "go" {
			s += ", with " + words
		}
		var also []string
		for _, a := range r.Also {
			also = append(also, a.Client.Name)
		}
		if len(also) > 0 {
			s += "; the same words come from " + strings.Join(also, " and ")
		}
		s += "."
	case id.Lang != "":
		s = "printed by a program eaddr does not know: the words are glibc's strerror text translated (" + id.Lang +
			"); eaddr recognised the translation, not the program."
	case id.Libc != "":
		s = "printed by a program eaddr does not know: the words are " + libcWords(id.Libc) + "."
	default:
		return // an errno name or number: nobody's words
	}
	t.wrap("", "  ", s)
}

// libcWords names a libc's wording for a person.
func libcWords(l explain.Libc) string {
	switch l {
	case "glibc":
		return "glibc's strerror text (Debian, Ubuntu, RHEL images)"
	case "musl":
		return "musl's strerror text (Alpine images)"
	case "go":
		return "Go's own error text"
	}
	return ""
}

// confirm: the commands, each under a comment that says what it shows,
// then what their words in capitals stand for.
func (t textOut) confirm(r *explain.Report) {
	if len(r.Confirm) == 0 {
		return
	}
	t.blank()
	head := "confirm it:"
	for _, c := range r.Confirm {
		if c.Prefix == explain.NetnsPrefix {
			head = "confirm it, as root on the failing pod's node (nsenter runs a command in the pod's own network namespace):"
		}
	}
	t.wrap("", "", head)
	for _, c := range r.Confirm {
		t.wrap("  # ", "  # ", c.Why)
		wrapCommand(t.w, t.width, "  ", c.Prefix, c.Run)
	}
	if len(r.Placeholders) == 0 {
		return
	}
	t.line("where")
	pad := 0
	for _, p := range r.Placeholders {
		pad = max(pad, len(p.Name))
	}
	for _, p := range r.Placeholders {
		t.wrap("  "+p.Name+strings.Repeat(" ", pad-len(p.Name)+2), strings.Repeat(" ", pad+4), p.Means)
	}
}

// details: --full's meaning, the client's notes and every other wording.
func (t textOut) details(r *explain.Report) {
	if r.Meaning != nil {
		t.blank()
		t.wrap("meaning: ", "  ", r.Meaning.Meaning)
	}
	if c := r.ID.Client; c != nil {
		t.blank()
		t.wrap("about "+c.Name+"'s words: ", "  ", c.Note)
		t.wrap("  source: ", "    ", c.Source)
	}
	if len(r.Other) == 0 {
		return
	}
	t.blank()
	t.line("the same failure in other words (grep for these):")
	label := 0
	for _, o := range r.Other {
		label = max(label, len(o.By)+3)
	}
	for _, o := range r.Other {
		by := string(o.By)
		if t.width >= label+40 {
			t.wrap("  "+by+strings.Repeat(" ", label-2-len(by)), strings.Repeat(" ", label), string(o.Text))
		} else {
			t.line("  " + by)
			t.wrap("      ", "      ", string(o.Text))
		}
	}
}

// ExplainInput is what `eaddr explain` says of its input before the answer.
type ExplainInput struct {
	Stdin bool
	Read  int  // bytes explain read
	Limit int  // the most it reads
	Given int  // bytes given, when known (an argument), else 0
	Cut   bool // the input went on after Read bytes
	// Lines is the number of non-empty lines read; with more than one (a
	// log), Line is the one explained, Recognised all that carry a
	// failure, and Echo the start of the explained line (EchoMore: the
	// bytes left out).
	Lines, Line int
	Recognised  []int
	Echo        string
	EchoMore    int
}

// maxListed is how many line numbers ExplainInput lists.
const maxListed = 10

// WriteExplainInput says how much explain read and, of a log, which line
// it explains. Echo is text from the workload: it is made safe here.
func WriteExplainInput(w io.Writer, in *ExplainInput, width int) {
	t := textOut{w: w, width: max(width, minWidth)}
	switch {
	case in.Cut && in.Stdin:
		t.wrap("input:    ", "          ", fmt.Sprintf("stdin, cut to the first %d bytes: explain reads at most %d KiB of stdin. "+
			"Give it the lines around the failure (kubectl logs --tail=200 POD | eaddr explain).", in.Read, in.Limit>>10))
	case in.Cut:
		t.wrap("input:    ", "          ", fmt.Sprintf("%d bytes, cut to the first %d: explain reads at most %d KiB", in.Given, in.Read, in.Limit>>10))
	}
	if in.Lines <= 1 {
		return
	}
	if in.Line == 0 {
		t.wrap("input:    ", "          ", fmt.Sprintf("%d lines; none carries a failure eaddr knows. The first:", in.Lines))
		return
	}
	listed := in.Recognised
	more := ""
	if len(listed) > maxListed {
		listed, more = listed[:maxListed], fmt.Sprintf(" and %d more", len(in.Recognised)-maxListed)
	}
	var nums []string
	for _, n := range listed {
		nums = append(nums, strconv.Itoa(n))
	}
	carry := "carry"
	if len(in.Recognised) == 1 {
		carry = "carries"
	}
	t.wrap("input:    ", "          ", fmt.Sprintf("%d lines; %d %s a failure eaddr knows (line %s%s); it explains line %d:",
		in.Lines, len(in.Recognised), carry, strings.Join(nums, ", "), more, in.Line))
	t.wrap("          ", "          ", quoteEcho(in.Echo, in.EchoMore))
	t.blank()
}

// quoteEcho is text from the input in quotes, with how much was left out;
// wrap makes it safe for the terminal.
func quoteEcho(s string, more int) string {
	q := `"` + s + `"`
	if more > 0 {
		q += fmt.Sprintf("... (%d more bytes)", more)
	}
	return q
}

// WriteExplainNotRecognised says that explain recognised nothing, how to
// find the errno all the same, and the closest wordings it knows. foreign:
// the text has letters other than English ones (it may be translated).
func WriteExplainNotRecognised(w io.Writer, echo string, more int, foreign bool, closest []explain.Wording, width int) {
	t := textOut{w: w, width: max(width, minWidth)}
	t.wrap("not recognised: ", "  ", quoteEcho(echo, more))
	why := "It may come from a program eaddr does not know, or be translated."
	if foreign {
		why = "It is not in English: eaddr knows glibc's translations of EADDRNOTAVAIL and EADDRINUSE only, not a program's own."
	}
	t.wrap("", "", why+" To see the errno: run the program again with LC_ALL=C (English messages), "+
		"trace its calls with strace -f -e trace=connect,bind PROGRAM, or run eaddr trace on its node.")
	if len(closest) == 0 {
		return
	}
	t.line("closest wordings eaddr knows:")
	for _, c := range closest {
		t.wrap("  "+string(c.By)+": ", "      ", string(c.Text))
	}
}
