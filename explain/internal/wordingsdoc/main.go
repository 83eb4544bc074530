// Command wordingsdoc rewrites the generated "why does every tool say
// something different?" section of docs/wordings.md from explain/catalog.json.
// go generate ./explain runs it with the working directory explain/.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eaddr/eaddr/explain"
)

func main() {
	readme := flag.String("readme", "../docs/wordings.md", "the page to update")
	flag.Parse()
	old, err := os.ReadFile(*readme)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
	section, err := explain.WordingsMarkdown()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
	updated, err := explain.ReplaceWordings(string(old), section)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*readme, []byte(updated), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
}
