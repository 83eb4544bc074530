package critest

import (
	"slices"
	"testing"
)

func TestParseCRILog(t *testing.T) {
	log := []byte(`2024-01-01T00:00:00.000000001Z stderr F time=... level=INFO msg=attached
2024-01-01T00:00:00.000000002Z stdout P {"schema":1,
2024-01-01T00:00:00.000000003Z stderr F interleaved
2024-01-01T00:00:00.000000004Z stdout P "kind":
2024-01-01T00:00:00.000000005Z stdout F "failure"}
2024-01-01T00:00:00.000000006Z stdout F 
2024-01-01T00:00:00.000000007Z stdout F a line with  two spaces
2024-01-01T00:00:00.000000008Z stderr P cut off
`)
	for _, tc := range []struct{ stream, want string }{
		{"", "time=... level=INFO msg=attached\ninterleaved\n{\"schema\":1,\"kind\":\"failure\"}\n\na line with  two spaces\ncut off\n"},
		{"stdout", "{\"schema\":1,\"kind\":\"failure\"}\n\na line with  two spaces\n"},
		{"stderr", "time=... level=INFO msg=attached\ninterleaved\ncut off\n"},
	} {
		if got := parseCRILog(log, tc.stream); got != tc.want {
			t.Errorf("parseCRILog(%q):\n%q\nwant\n%q", tc.stream, got, tc.want)
		}
	}
	if got := parseCRILog(nil, ""); got != "" {
		t.Errorf("empty log: %q", got)
	}
}

func TestRepository(t *testing.T) {
	for ref, want := range map[string]string{
		"localhost/eaddr:test":          "localhost/eaddr",
		"localhost:5000/eaddr:v1":       "localhost:5000/eaddr",
		"localhost:5000/eaddr":          "localhost:5000/eaddr",
		"ghcr.io/x/eaddr@sha256:abc":    "ghcr.io/x/eaddr",
		"ghcr.io/x/eaddr:v1@sha256:abc": "ghcr.io/x/eaddr",
	} {
		if got := repository(ref); got != want {
			t.Errorf("repository(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestCRICaps(t *testing.T) {
	if got, want := criCaps([]string{"CAP_BPF", "perfmon", "ALL", "cap_sys_admin"}), []string{"BPF", "PERFMON", "ALL", "SYS_ADMIN"}; !slices.Equal(got, want) {
		t.Errorf("criCaps = %q, want %q", got, want)
	}
}
