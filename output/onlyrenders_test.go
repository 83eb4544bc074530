package output

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const explainPath = "github.com/eaddr/eaddr/explain"

// TestOutputOnlyRenders: output writes what explain finished and computes
// nothing of it: no function or method of package explain is called (or
// taken as a value) from output's non-test files. Its types, their fields
// and its constants are what output reads. The files are type-checked, so
// that a method reached through a field (x.Client.Message) counts too.
func TestOutputOnlyRenders(t *testing.T) {
	fset := token.NewFileSet()
	files := outputFiles(t, fset)
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: exportImporter(t, fset)}
	if _, err := conf.Check("github.com/eaddr/eaddr/output", fset, files, info); err != nil {
		t.Fatal(err)
	}
	seen := 0 // explain's objects used at all: a check that found none checked nothing
	var calls []string
	for id, obj := range info.Uses {
		if obj.Pkg() == nil || obj.Pkg().Path() != explainPath {
			continue
		}
		seen++
		if fn, ok := obj.(*types.Func); ok {
			calls = append(calls, fset.Position(id.Pos()).String()+": "+fn.FullName())
		}
	}
	slices.Sort(calls)
	for _, c := range calls {
		t.Errorf("%s: explain must leave it finished in the Explanation (or Report): output only renders", c)
	}
	if seen == 0 {
		t.Fatal("output uses nothing of package explain: the check looked at the wrong files")
	}
}

// outputFiles parses output's non-test Go files.
func outputFiles(t *testing.T, fset *token.FileSet) []*ast.File {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("no Go files in output")
	}
	return files
}

// exportImporter imports output's dependencies from the compiler's export
// data, which `go list -export` builds (from the build cache after `go
// test` built them): type-checking them from source would mean all of
// cilium/ebpf.
func exportImporter(t *testing.T, fset *token.FileSet) types.Importer {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	if exports[explainPath] == "" {
		t.Fatalf("go list gave no export data for %s:\n%s", explainPath, out)
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
}
