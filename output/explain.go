package output

import (
	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
)

// Events writes event records: with the explain object of an Explanation,
// as explain finished it, and a diagnosis. It holds no state and does not
// allocate once the caller's buffer has grown.
type Events struct{}

// Append appends ev as one JSON object with, when they are not nil, the
// explain object of x and the diagnosis g. With x.Full, the explain object
// lists how every other client and libc words the same failure.
func (w *Events) Append(b []byte, ev *decode.Event, node string, x *explain.Explanation, g *diagnose.Diagnosis) []byte {
	b = appendEventFields(b, ev, node)
	if x != nil {
		b = appendExplain(b, x, g)
	}
	b = AppendDiagnosisJSON(b, g)
	return append(b, '}')
}

// appendExplain appends the explain object; the diagnosis's own meaning of
// the failure, when it has one, replaces the catalog's general one.
func appendExplain(b []byte, x *explain.Explanation, g *diagnose.Diagnosis) []byte {
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
	b = appendClient(b, &comma, x)
	if x.Full {
		b = appendField(b, &comma, "other_wordings")
		b = appendWordingArray(b, x.OtherWordings)
	}
	return append(b, '}')
}

// appendClient appends the client, the line it printed when eaddr knows
// its wording, and the errno texts to grep for. A program whose wording
// eaddr does not know is "unknown", with why: never a guessed line.
func appendClient(b []byte, comma *bool, x *explain.Explanation) []byte {
	b = appendField(b, comma, "client")
	if x.Client == nil {
		b = AppendString(b, "unknown")
		b = appendField(b, comma, "client_unknown")
		b = AppendString(b, x.ClientUnknown)
	} else {
		b = AppendString(b, x.Client.Name)
		if x.HasClientMessage {
			b = appendField(b, comma, "client_message")
			b = appendBytesString(b, x.ClientMessage)
			b = appendField(b, comma, "confidence")
			b = AppendString(b, x.Confidence)
		}
	}
	if x.Retries != "" {
		b = appendField(b, comma, "retries")
		b = AppendString(b, x.Retries)
	}
	if len(x.Grep) > 0 {
		b = appendField(b, comma, "grep")
		b = appendStringArray(b, x.Grep)
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
	if x.HasClientMessage {
		b = append(b, " printed: "...)
		b = append(b, x.ClientMessage...)
		if x.Confidence == explain.ConfidenceTemplate {
			b = append(b, " (<...> varies)"...)
		}
		return b
	}
	for i, s := range x.Grep {
		if i == 0 {
			b = append(b, ": wording unknown, grep for "...)
		} else {
			b = append(b, " or "...)
		}
		b = AppendString(b, s)
	}
	return b
}
