package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSkipPackagesAreListed: every Debian package that a skip names, as a
// literal in a call of Program, Missing or NotInstalled anywhere in the
// repository, is one that .ci/deps.sh installs, so that `sudo make deps`
// really installs what a skip asks for. Tables that name packages (the
// demo's clients, the wordings rows) are checked by their own tests;
// testdata/ is left out (gotest's sample names a package that does not exist).
func TestSkipPackagesAreListed(t *testing.T) {
	listed := DepsPackages(t)
	root := filepath.Join(filepath.Dir(DepsScript()), "..")
	argOf := map[string]int{"Program": 2, "Missing": 2, "NotInstalled": 1}
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "vendor" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "testenv" {
				return true
			}
			i, ok := argOf[sel.Sel.Name]
			if !ok || len(call.Args) <= i {
				return true
			}
			lit, ok := call.Args[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			pkg, _ := strconv.Unquote(lit.Value)
			found++
			if !listed[pkg] {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s: testenv.%s names Debian package %q, which .ci/deps.sh does not install", rel, sel.Sel.Name, pkg)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no testenv.Program/Missing/NotInstalled call with a literal package found: the walk looked in the wrong place")
	}
	t.Logf("%d skips name a package; .ci/deps.sh lists %d packages", found, len(listed))
}

func TestPackageRe(t *testing.T) {
	for reason, want := range map[string]string{
		NotInstalled("busybox", "busybox-static"):                   "busybox-static",
		NotInstalled("python3 module requests", "python3-requests"): "python3-requests",
		NotInstalled("g++", "g++"):                                  "g++",
		"test requires root (euid 0), running as euid 1000":         "",
	} {
		got := ""
		if m := PackageRe.FindStringSubmatch(reason); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%q: package %q, want %q", reason, got, want)
		}
	}
}
