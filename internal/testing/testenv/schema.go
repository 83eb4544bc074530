package testenv

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// EventSchema compiles docs/event.schema.json, the published schema of the
// JSON stream, once.
func EventSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	schemaOnce.Do(func() {
		path := filepath.Join(Root(), "docs", "event.schema.json")
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		schema, schemaErr = c.Compile(path)
	})
	if schemaErr != nil {
		t.Fatalf("docs/event.schema.json: %v", schemaErr)
	}
	return schema
}

// ValidateLine checks one line of the JSON stream against the schema and
// fails the test (without stopping it) when it does not validate.
func ValidateLine(t testing.TB, line string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
	if err != nil {
		t.Errorf("not JSON: %v: %s", err, line)
		return
	}
	if err := EventSchema(t).Validate(v); err != nil {
		t.Errorf("does not validate against docs/event.schema.json: %v\n%s", err, line)
	}
}
