package output

import (
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/termtext"
)

// appendClientText appends the client's line: who printed what, when eaddr
// knows the wording; else which words of the errno to look for. A line
// eaddr only expects (a template) says so: it is never shown as printed.
func appendClientText(b []byte, x *explain.Explanation, w int) []byte {
	if x.Expected != "" {
		b = label(b, "expected")
		b = appendWrapped(b, x.Expected, textIndent, textIndent, w)
		b = append(b, '\n')
	}
	var head [96]byte
	h := appendClientName(head[:0], x)
	b = label(b, "client")
	switch {
	case x.HasClientMessage && x.Confidence == explain.ConfidenceTemplate:
		h = append(h, " prints (<...> varies): "...)
	case x.HasClientMessage:
		h = append(h, " printed: "...)
	case len(x.Grep) > 0:
		h = append(h, ": its words are not known; grep its log for"...)
	}
	b = append(b, h...)
	col := textIndent + termtext.Width(view(h))
	switch {
	case x.HasClientMessage:
		b = appendWrapped(b, view(x.ClientMessage), col, textIndent, w)
	case len(x.Grep) > 0:
		b = appendGrep(b, x.Grep, col, textIndent, w)
	}
	return append(b, '\n')
}

// appendClientName appends the client's name and libc, or the runtime, or
// "unknown program". Catalog names and libc names are eaddr's own text.
func appendClientName(b []byte, x *explain.Explanation) []byte {
	switch {
	case x.Client != nil:
		b = append(b, x.Client.Name...)
	case x.Binary != nil && x.Binary.Runtime != "":
		b = append(b, "a "...)
		b = append(b, x.Binary.Runtime...)
		b = append(b, " program"...)
	default:
		b = append(b, "unknown program"...)
	}
	if x.Binary != nil && x.Binary.Libc != explain.LibcUnknown {
		b = append(b, " ("...)
		b = append(b, x.Binary.Libc...)
		b = append(b, ')')
	}
	return b
}

// appendGrep appends the errno's words to grep for, quoted ("A" or "B"),
// wrapped with lines after the first at column indent.
func appendGrep(b []byte, grep []string, col, indent, w int) []byte {
	var buf [256]byte
	q := buf[:0]
	for i, s := range grep {
		if i > 0 {
			q = append(q, " or "...)
		}
		q = append(append(append(q, '"'), s...), '"')
	}
	b = append(b, ' ')
	return appendWrapped(b, view(q), col+1, indent, w)
}

// appendDiagnosisText appends the cause and each fix, or why the cause is
// not known. g nil: the trace runs without --diagnose, nothing is said.
func appendDiagnosisText(b []byte, g *diagnose.Diagnosis, w int) []byte {
	if g == nil {
		return b
	}
	if g.Meaning != "" {
		b = label(b, "meaning")
		b = appendWrapped(b, g.Meaning, textIndent, textIndent, w)
		b = append(b, '\n')
	}
	b = label(b, "cause")
	switch {
	case g.Verdict != "":
		b = appendWrapped(b, g.Verdict, textIndent, textIndent, w)
	case g.Err != "":
		b = appendWrapped(b, "not known: "+g.Err, textIndent, textIndent, w)
	default:
		b = append(b, "not known"...)
	}
	b = append(b, '\n')
	for _, f := range g.Fix {
		b = label(b, "fix")
		b = appendWrapped(b, f, textIndent, textIndent, w)
		b = append(b, '\n')
	}
	return b
}
