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
}

// Append appends ev as one JSON object with, when they are not nil, the
// explain object of x and the diagnosis g. With wordings, the explain object
// lists how every other client and libc words the same failure.
func (w *Events) Append(b []byte, ev *decode.Event, node string, x *explain.Explanation, wordings bool, g *diagnose.Diagnosis) []byte {
	b = appendEventFields(b, ev, node)
	if w != nil && w.Explainer != nil && x != nil {
		b = w.appendExplain(b, x, wordings)
	}
	b = AppendDiagnosisJSON(b, g)
	return append(b, '}')
}

func (w *Events) appendExplain(b []byte, x *explain.Explanation, wordings bool) []byte {
	b = append(b, `,"explain":{`...)
	comma := false
	if x.Meaning != nil {
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
	}
	if x.Client != nil {
		var ok bool
		b = appendField(b, &comma, "client")
		b = AppendString(b, x.Client.Name)
		w.msg, ok = x.AppendClientMessage(w.msg[:0])
		if ok {
			b = appendField(b, &comma, "client_message")
			b = appendBytesString(b, w.msg)
		}
	}
	if wordings {
		b = appendField(b, &comma, "other_wordings")
		b = append(b, '[')
		for i, wd := range w.Explainer.Wordings(x) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"by":`...)
			b = appendBytesString(b, wd.By)
			b = append(b, `,"text":`...)
			b = appendBytesString(b, wd.Text)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
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
	if !ok {
		b = b[:n]
	}
	return b
}
