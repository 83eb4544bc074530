// Command schemacheck validates JSON lines (one event each, from stdin) against a JSON schema,
// docs/event.schema.json for testdata/kernels/check.py. It prints one line per event that is not
// JSON or does not validate, and "schemacheck: N lines, M invalid"; it exits 1 when M > 0 or N = 0.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: schemacheck SCHEMA.json < events")
		os.Exit(2)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemacheck:", err)
		os.Exit(2)
	}
	n, bad := 0, 0
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		n++
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err == nil {
			err = s.Validate(v)
		}
		if err != nil {
			bad++
			fmt.Printf("schemacheck: line %d: %v\n", n, strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	fmt.Printf("schemacheck: %d lines, %d invalid\n", n, bad)
	if bad > 0 || n == 0 {
		os.Exit(1)
	}
}
