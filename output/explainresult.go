package output

import (
	"strconv"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
)

// ExplainResult is what `eaddr explain -o json` says of one input.
type ExplainResult struct {
	Input      string // the start of the input (of a log: of the explained line), as echoed
	InputBytes int
	InputCut   bool // only the first bytes were read (4 KiB of an argument, 64 KiB of stdin)
	// InputLines is the number of non-empty lines read; with more than
	// one, InputLine is the line explained (1-based) and RecognisedLines
	// every line that carries a failure.
	InputLines, InputLine int
	RecognisedLines       []int
	Recognised            bool
	Closest               []explain.Wording // not recognised: the nearest wordings eaddr knows

	Errno                int
	Syscall              decode.Syscall
	SyscallInferred      bool
	Client, ClientSource string
	Libc                 string
	Language             string // the text is glibc's translation into these languages
	Meaning, Summary     string
	Causes               []string
	Confirm              []explain.Command
	Placeholders         []explain.Placeholder
	Other                []explain.Wording
}

// AppendExplainResult appends the result as one JSON object.
func AppendExplainResult(b []byte, r *ExplainResult) []byte {
	b = append(b, `{"input":`...)
	b = AppendString(b, r.Input)
	b = append(b, `,"input_bytes":`...)
	b = strconv.AppendInt(b, int64(r.InputBytes), 10)
	b = append(b, `,"input_cut":`...)
	b = strconv.AppendBool(b, r.InputCut)
	if r.InputLines > 1 {
		b = appendIntField(b, "input_lines", r.InputLines, false)
		if r.InputLine > 0 {
			b = appendIntField(b, "input_line", r.InputLine, false)
			b = appendInts(b, "recognised_lines", r.RecognisedLines)
		}
	}
	if !r.Recognised {
		b = append(b, `,"recognised":false`...)
		b = appendWordings(b, "closest", r.Closest)
		return append(b, '}')
	}
	b = append(b, `,"recognised":true`...)
	if r.Errno != 0 {
		b = append(b, `,"errno":`...)
		b = AppendString(b, decode.ErrnoName(r.Errno))
		b = appendIntField(b, "errno_num", r.Errno, false)
	}
	b = append(b, `,"syscall":`...)
	b = AppendString(b, r.Syscall.String())
	b = append(b, `,"syscall_inferred":`...)
	b = strconv.AppendBool(b, r.SyscallInferred)
	comma := true
	if r.Client != "" {
		b = appendStrField(b, &comma, "client", r.Client)
		b = append(b, `,"client_source":`...)
		b = AppendString(b, r.ClientSource)
	} else {
		b = appendStrField(b, &comma, "client", "unknown")
	}
	b = appendStrField(b, &comma, "libc", r.Libc)
	b = appendStrField(b, &comma, "language", r.Language)
	b = appendStrField(b, &comma, "summary", r.Summary)
	if r.Meaning != "" {
		b = appendStrField(b, &comma, "meaning", r.Meaning)
		b = appendStrings(b, "causes", r.Causes)
	}
	b = appendWordings(b, "other_wordings", r.Other)
	return appendConfirm(b, r.Confirm, r.Placeholders)
}

// appendConfirm appends the commands as "confirm" (each one line, as a
// shell takes it), what each shows as "confirm_why", and the placeholders.
func appendConfirm(b []byte, cmds []explain.Command, ph []explain.Placeholder) []byte {
	lines := make([]string, 0, len(cmds))
	whys := make([]string, 0, len(cmds))
	for _, c := range cmds {
		line := c.Run
		if c.Prefix != "" {
			line = c.Prefix + " " + c.Run
		}
		lines, whys = append(lines, line), append(whys, c.Why)
	}
	b = appendStrings(b, "confirm", lines)
	b = appendStrings(b, "confirm_why", whys)
	b = append(b, `,"placeholders":{`...)
	for i, p := range ph {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, p.Name)
		b = append(b, ':')
		b = AppendString(b, p.Means)
	}
	return append(b, `}}`...)
}

// appendStrings appends `,"name":[...]`, empty lists included.
func appendStrings(b []byte, name string, list []string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendStringArray(b, list)
}

// appendInts appends `,"name":[1,2,...]`.
func appendInts(b []byte, name string, list []int) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":[`...)
	for i, n := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, ']')
}

// appendWordings appends `,"name":[{"by":...,"text":...},...]`.
func appendWordings(b []byte, name string, list []explain.Wording) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendWordingArray(b, list)
}
