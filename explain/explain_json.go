package explain

import (
	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
)

// appendJSONExplained appends ev as appendJSON does, with an "explain"
// object from x (docs/events.md). With wordings, it lists how every other
// client and libc words the same failure. It does not allocate once the
// Explainer's buffers have grown.
func (e *Explainer) appendJSONExplained(b []byte, ev *decode.Event, node string, x *Explanation, wordings bool) []byte {
	return AppendEvent(b, ev, node, e, x, wordings, nil)
}

// AppendEvent appends ev as one JSON object with, when they are not nil, the
// explain object of x (made by e) and the diagnosis g. It does not allocate
// once e's buffers have grown.
func AppendEvent(b []byte, ev *decode.Event, node string, e *Explainer, x *Explanation, wordings bool, g *diagnose.Diagnosis) []byte {
	b = decode.AppendEventFields(b, ev, node)
	if e != nil && x != nil {
		b = e.appendExplain(b, x, wordings)
	}
	b = diagnose.AppendDiagnosisJSON(b, g)
	return append(b, '}')
}

func (e *Explainer) appendExplain(b []byte, x *Explanation, wordings bool) []byte {
	b = append(b, `,"explain":{`...)
	comma := false
	if x.Meaning != nil {
		b = decode.AppendField(b, &comma, "meaning")
		b = decode.AppendString(b, x.Meaning.Meaning)
	}
	if x.Binary != nil {
		if x.Binary.Runtime != "" {
			b = decode.AppendField(b, &comma, "runtime")
			b = decode.AppendString(b, x.Binary.Runtime)
		}
		if x.Binary.Libc != LibcUnknown {
			b = decode.AppendField(b, &comma, "libc")
			b = decode.AppendString(b, string(x.Binary.Libc))
		}
	}
	if x.Client != nil {
		var ok bool
		b = decode.AppendField(b, &comma, "client")
		b = decode.AppendString(b, x.Client.Name)
		e.msg, ok = x.AppendClientMessage(e.msg[:0])
		if ok {
			b = decode.AppendField(b, &comma, "client_message")
			b = decode.AppendBytesString(b, e.msg)
		}
	}
	if wordings {
		b = decode.AppendField(b, &comma, "other_wordings")
		b = append(b, '[')
		for i, w := range e.Wordings(x) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"by":`...)
			b = decode.AppendBytesString(b, w.By)
			b = append(b, `,"text":`...)
			b = decode.AppendBytesString(b, w.Text)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// AppendTableExplained appends the second line of a table row: which client
// it was and what it most likely printed.
func (x *Explanation) AppendTableExplained(b []byte) []byte {
	b = append(b, "    ↳ "...)
	switch {
	case x.Client != nil:
		b = append(b, x.Client.Name...)
	case x.Binary != nil && x.Binary.Runtime != "":
		b = append(b, x.Binary.Runtime...)
	default:
		b = append(b, "unknown program"...)
	}
	if x.Binary != nil && x.Binary.Libc != LibcUnknown {
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
