package eaddrtest

import (
	"encoding/json"
	"testing"
)

// ExplainJSON is the part of `eaddr explain -o json` the tests read.
type ExplainJSON struct {
	Input        string                      `json:"input"`
	InputLines   int                         `json:"input_lines"`
	InputLine    int                         `json:"input_line"`
	Recognised   bool                        `json:"recognised"`
	Errno        string                      `json:"errno"`
	ErrnoNum     int                         `json:"errno_num"`
	Syscall      string                      `json:"syscall"`
	Client       string                      `json:"client"`
	Libc         string                      `json:"libc"`
	Language     string                      `json:"language"`
	Summary      string                      `json:"summary"`
	Other        []struct{ By, Text string } `json:"other_wordings"`
	Confirm      []string                    `json:"confirm"`
	ConfirmWhy   []string                    `json:"confirm_why"`
	Placeholders map[string]string           `json:"placeholders"`
	Closest      []struct{ By, Text string } `json:"closest"`
}

// DecodeExplain decodes the JSON answer of eaddr explain, failing the test if
// it is not one.
func DecodeExplain(t *testing.T, out string) ExplainJSON {
	t.Helper()
	var r ExplainJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}
