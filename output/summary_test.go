package output

import (
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A summary names the kernel's skipped runs once there was one, for the
// interval and in total, and validates; without any it does not name
// them; the schema refuses one of the pair alone.
func TestSummaryRunsSkipped(t *testing.T) {
	var errnos [256]uint64
	now := time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)
	s := Summary{Time: now, Since: now.Add(-time.Minute), Node: "n", Errnos: &errnos}
	none := string(AppendSummary(nil, &s))
	testenv.ValidateLine(t, none)
	if strings.Contains(none, "runs_skipped") {
		t.Errorf("%s: names runs_skipped with none", none)
	}
	s.RunsSkipped, s.RunsSkippedTotal = 0, 3 // none in this interval, 3 before
	some := string(AppendSummary(nil, &s))
	testenv.ValidateLine(t, some)
	if !strings.Contains(some, `,"runs_skipped":0,"runs_skipped_total":3}`) {
		t.Errorf("%s: want runs_skipped 0 and runs_skipped_total 3", some)
	}
	schema := testenv.EventSchema(t)
	for _, line := range []string{
		strings.Replace(some, `,"runs_skipped_total":3`, ``, 1),
		strings.Replace(some, `,"runs_skipped":0`, ``, 1),
		strings.Replace(some, `"runs_skipped_total":3`, `"runs_skipped_total":0`, 1),
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if schema.Validate(v) == nil {
			t.Errorf("validated: %s", line)
		}
	}
}
