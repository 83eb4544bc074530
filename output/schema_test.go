package output

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// The schema is strict enough to catch what breaks a log pipeline.
func TestSchemaRejects(t *testing.T) {
	good := string(appendJSON(nil, &decode.Event{Syscall: decode.Connect, Errno: 99, Comm: []byte("curl"), PID: 1, NetNS: 1, MntNS: 1, CgroupID: 1}, "n"))
	testenv.ValidateLine(t, good)
	s := testenv.EventSchema(t)
	for name, line := range map[string]string{
		"null field":          strings.Replace(good, `"node":"n"`, `"node":null`, 1),
		"unknown field":       strings.Replace(good, `"node":"n"`, `"node":"n","extra":1`, 1),
		"string port":         strings.Replace(good, `"syscall":"connect"`, `"syscall":"connect","remote":{"ip":"10.0.0.1","port":"80"}`, 1),
		"failure no errno":    strings.Replace(good, `"errno":"EADDRNOTAVAIL","errno_num":99,`, ``, 1),
		"nodeport with errno": strings.Replace(good, `"kind":"failure"`, `"kind":"nodeport_collision"`, 1),
		"local time":          strings.Replace(good, `Z"`, `+01:00"`, 1),
		"bad syscall":         strings.Replace(good, `"connect"`, `"accept"`, 1),
		"summary missing":     `{"schema":1,"kind":"summary","time":"2026-01-01T00:00:00Z"}`,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: validated: %s", name, line)
		}
	}
}
