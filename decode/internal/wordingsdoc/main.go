// Command wordingsdoc rewrites the generated "why does every tool say
// something different?" section of README.md from decode/catalog.json.
// go generate ./decode runs it with the working directory decode/.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eaddr/eaddr/decode"
)

func main() {
	readme := flag.String("readme", "../README.md", "README to update")
	flag.Parse()
	old, err := os.ReadFile(*readme)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
	section, err := decode.WordingsMarkdown()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
	updated, err := decode.ReplaceWordings(string(old), section)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*readme, []byte(updated), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "wordingsdoc:", err)
		os.Exit(1)
	}
}
