package explain

import (
	"os"
	"testing"
)

// README's section is generated from the catalog; it must not drift.
func TestREADMEWordingsUpToDate(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
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
		t.Error("README.md's wordings section is out of date: run go generate ./explain")
	}
}
