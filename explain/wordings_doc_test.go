package explain

import (
	"os"
	"testing"
)

// docs/wordings.md's table is generated from the catalog; it must not drift.
func TestWordingsDocUpToDate(t *testing.T) {
	readme, err := os.ReadFile("../docs/wordings.md")
	if err != nil {
		t.Fatal(err)
	}
	section, err := WordingsMarkdown()
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplaceWordings(string(readme), section)
	if err != nil {
		t.Fatal(err)
	}
	if want != string(readme) {
		t.Error("docs/wordings.md's table is out of date: run go generate ./explain")
	}
}
