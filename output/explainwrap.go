package output

import (
	"io"
	"strings"

	"github.com/eaddr/eaddr/internal/termtext"
)

// explain's answer is prose under prefixes ("  1. ", "  # ") and shell
// commands a person pastes: the prose is wrapped by appendWrapped, the
// commands here, with backslash continuations.

// wrapText writes s as prose of at most width columns, made safe for a
// terminal (appendWrapped): the first line starts with first, the others
// with rest, which may be more than spaces ("  # " keeps a shell comment a
// comment on every line). first and rest are eaddr's own text.
func wrapText(w io.Writer, width int, first, rest, s string) {
	b := appendWrapped([]byte(first), s, termtext.Columns(first), len(rest), width)
	text := string(b)
	if strings.TrimSpace(rest) != "" {
		text = strings.ReplaceAll(text, "\n"+strings.Repeat(" ", len(rest)), "\n"+rest)
	}
	io.WriteString(w, text+"\n")
}

// wrapCommand writes a shell command that a person can paste: prefix and
// run on one line when they fit in width after indent; else prefix, a
// backslash, and run from the next line, two columns further in. A part
// wider than a line is broken between words (never inside a quoted word,
// and between an option and its value only when they fit no line
// together), each line but the last ended with a backslash. A word longer
// than a line is left whole: a command cut inside a word would not paste.
// The command is eaddr's own text, filled with what explain parsed.
func wrapCommand(w io.Writer, width int, indent, prefix, run string) {
	whole := run
	if prefix != "" {
		whole = prefix + " " + run
	}
	if termtext.Columns(indent+whole) <= width {
		io.WriteString(w, indent+whole+"\n")
		return
	}
	c := cmdLines{w: w, width: width, line: indent, cont: indent + "  ", empty: true}
	if prefix != "" {
		for _, word := range shellWords(prefix) {
			c.add(word)
		}
		c.next()
		c.cont = indent + "    " // run's own continuation lines, under its start
	}
	for _, word := range shellWords(run) {
		c.add(word)
	}
	io.WriteString(w, c.line+"\n")
}

// cmdLines writes the lines of one command, continued with backslashes.
type cmdLines struct {
	w          io.Writer
	width      int
	line, cont string // the line so far; how a continuation line starts
	empty      bool   // line holds no word yet
}

func (c *cmdLines) add(word string) {
	if opt, value, pair := strings.Cut(word, " "); pair && termtext.Columns(c.cont+word)+2 > c.width {
		c.add(opt) // an option and its value fit no line together: apart, then
		c.add(value)
		return
	}
	if !c.empty && termtext.Columns(c.line)+1+termtext.Columns(word)+2 > c.width {
		c.next()
	}
	if !c.empty {
		c.line += " "
	}
	c.line += word
	c.empty = false
}

// next ends the line with a backslash and starts a continuation line.
func (c *cmdLines) next() {
	io.WriteString(c.w, c.line+" \\\n")
	c.line, c.empty = c.cont, true
}

// shellWords splits a command at its spaces, keeping a single-quoted part
// ('{print $5, $1}') in one word, and an option with its value ("--pod
// POD", "-t PID") together, so that a line does not end before the value.
func shellWords(s string) []string {
	var out []string
	words := shellSplit(s)
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") && !strings.Contains(w, "=") && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && words[i+1] != "|" {
			w += " " + words[i+1]
			i++
		}
		out = append(out, w)
	}
	return out
}

// shellSplit splits a command at the spaces outside single quotes.
func shellSplit(s string) []string {
	var out []string
	var b strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted = !quoted
		case r == ' ' && !quoted:
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
			continue
		}
		b.WriteRune(r)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}
