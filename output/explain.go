package output

import (
	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
)

// Events writes event records, reusing its buffers: with the explain object
// of an Explanation (when Explainer is set) and a diagnosis. Not safe for
// concurrent use; it does not allocate once its buffers have grown.
type Events struct {
	Explainer *explain.Explainer // nil: no explain objects
	msg       []byte
	grep      []string
}

// Append appends ev as one JSON object with, when they are not nil, the
// explain object of x and the diagnosis g. With wordings, the explain object
// lists how every other client and libc words the same failure.
func (w *Events) Append(b []byte, ev *decode.Event, node string, x *explain.Explanation, wordings bool, g *diagnose.Diagnosis) []byte {
	b = appendEventFields(b, ev, node)
	if w != nil && w.Explainer != nil && x != nil {
		b = w.appendExplain(b, x, wordings, g)
	}
	b = AppendDiagnosisJSON(b, g)
	return append(b, '}')
}

// appendExplain appends the explain object; the diagnosis's own meaning of
// the failure, when it has one, replaces the catalog's general one.
func (w *Events) appendExplain(b []byte, x *explain.Explanation, wordings bool, g *diagnose.Diagnosis) []byte {
	b = append(b, `,"explain":{`...)
	comma := false
	if x.Expected != "" {
		b = appendField(b, &comma, "expected")
		b = AppendString(b, x.Expected)
	}
	if g != nil && g.Meaning != "" {
		b = appendField(b, &comma, "meaning")
		b = AppendString(b, g.Meaning)
	} else if x.Meaning != nil {
		b = appendField(b, &comma, "meaning")
		b = AppendString(b, x.Meaning.Meaning)
	}
	if x.Binary != nil {
		if x.Binary.Runtime != "" {
			b = appendField(b, &comma, "runtime")
			b = AppendString(b, x.Binary.Runtime)
		}
		if x.Binary.Libc != explain.LibcUnknown {
			b = appendField(b, &comma, "libc")
			b = AppendString(b, string(x.Binary.Libc))
		}
		if len(x.Program) > 0 {
			b = appendField(b, &comma, "program")
			b = appendBytesString(b, x.Program)
		}
	}
	b = w.appendClient(b, &comma, x)
	if wordings {
		b = appendField(b, &comma, "other_wordings")
		b = appendWordingArray(b, w.Explainer.Wordings(x))
	}
	return append(b, '}')
}

// appendClient appends the client, the line it printed when eaddr knows
// its wording, and the errno texts to grep for. A program whose wording
// eaddr does not know is "unknown", with why: never a guessed line.
func (w *Events) appendClient(b []byte, comma *bool, x *explain.Explanation) []byte {
	b = appendField(b, comma, "client")
	if x.Client == nil {
		b = AppendString(b, "unknown")
		b = appendField(b, comma, "client_unknown")
		b = AppendString(b, x.ClientUnknown())
	} else {
		var ok bool
		b = AppendString(b, x.Client.Name)
		w.msg, ok = x.AppendClientMessage(w.msg[:0])
		if ok {
			b = appendField(b, comma, "client_message")
			b = appendBytesString(b, w.msg)
			b = appendField(b, comma, "confidence")
			b = AppendString(b, x.Confidence())
		}
	}
	if note, _ := x.RetryNote(); note != "" {
		b = appendField(b, comma, "retries")
		b = AppendString(b, note)
	}
	w.grep = x.Grep(w.grep[:0])
	if len(w.grep) > 0 {
		b = appendField(b, comma, "grep")
		b = appendStringArray(b, w.grep)
	}
	return b
}

// AppendTableExplained appends the second line of a table row: which client
// it was and what it most likely printed.
func AppendTableExplained(b []byte, x *explain.Explanation) []byte {
	b = append(b, "    ↳ "...)
	switch {
	case x.Client != nil:
		b = append(b, x.Client.Name...)
	case x.Binary != nil && x.Binary.Runtime != "":
		b = append(b, x.Binary.Runtime...)
	default:
		b = append(b, "unknown program"...)
	}
	if x.Binary != nil && x.Binary.Libc != explain.LibcUnknown {
		b = append(b, " ("...)
		b = append(b, x.Binary.Libc...)
		b = append(b, ')')
	}
	n := len(b)
	b = append(b, " printed: "...)
	b, ok := x.AppendClientMessage(b)
	if ok {
		if x.Confidence() == explain.ConfidenceTemplate {
			b = append(b, " (<...> varies)"...)
		}
		return b
	}
	b = b[:n]
	var g [2]string
	for i, s := range x.Grep(g[:0]) {
		if i == 0 {
			b = append(b, ": wording unknown, grep for "...)
		} else {
			b = append(b, " or "...)
		}
		b = AppendString(b, s)
	}
	return b
}
