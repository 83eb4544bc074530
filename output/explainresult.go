package output

import (
	"strconv"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
)

// ExplainResult is what `eaddr explain -o json` says of one input.
type ExplainResult struct {
	Input      string // the start of the input, as echoed
	InputBytes int
	InputCut   bool // only the first 4 KiB were read
	Recognised bool
	Closest    []explain.Wording // not recognised: the nearest wordings eaddr knows

	Errno                int
	Syscall              decode.Syscall
	SyscallInferred      bool
	Client, ClientSource string
	Libc                 string
	Meaning              string
	Causes, Confirm      []string
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
	if r.Meaning != "" {
		b = appendStrField(b, &comma, "meaning", r.Meaning)
		b = appendStrings(b, "causes", r.Causes)
	}
	b = appendWordings(b, "other_wordings", r.Other)
	b = appendStrings(b, "confirm", r.Confirm)
	return append(b, '}')
}

// appendStrings appends `,"name":[...]`, empty lists included.
func appendStrings(b []byte, name string, list []string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendStringArray(b, list)
}

// appendWordings appends `,"name":[{"by":...,"text":...},...]`.
func appendWordings(b []byte, name string, list []explain.Wording) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendWordingArray(b, list)
}
