package top

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// ANSI escapes of the interactive view.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l" // the alternate screen, cursor hidden
	leaveScreen = "\x1b[?25h\x1b[?1049l" // cursor shown, the screen as it was
	home        = "\x1b[H"
	clearLine   = "\x1b[K"
	clearBelow  = "\x1b[J"
)

// screen is the terminal in raw mode on the alternate screen.
type screen struct {
	in, out *os.File
	state   *term.State
}

// openScreen puts in in raw mode (keys arrive one by one, not echoed) and
// out on the alternate screen; restore undoes both.
func openScreen(in, out *os.File) (*screen, error) {
	st, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return nil, fmt.Errorf("putting the terminal in raw mode: %w", err)
	}
	s := &screen{in: in, out: out, state: st}
	if _, err := io.WriteString(out, enterScreen); err != nil {
		s.restore()
		return nil, err
	}
	return s, nil
}

// restore leaves the alternate screen and the raw mode; safe to call twice.
func (s *screen) restore() {
	if s.state == nil {
		return
	}
	io.WriteString(s.out, leaveScreen)
	term.Restore(int(s.in.Fd()), s.state)
	s.state = nil
}

// size is the terminal's columns and rows (80x24 when it does not say).
func (s *screen) size() (w, h int) {
	w, h, err := term.GetSize(int(s.out.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// width is the terminal's columns, for the table's layout.
func (s *screen) width() int {
	w, _ := s.size()
	return w
}

// draw writes lines from the top left, each cut to the terminal's width
// (the table is laid out for it: this only guards), as many as its height
// holds (the last saying how many were left out).
func (s *screen) draw(lines []string) error {
	w, h := s.size()
	if len(lines) > h {
		more := len(lines) - h + 1
		lines = append(lines[:h-1:h-1], fmt.Sprintf("... %d more rows (a taller terminal, or --once)", more))
	}
	var b strings.Builder
	b.WriteString(home)
	for i, l := range lines {
		b.WriteString(cut(l, w))
		b.WriteString(clearLine)
		if i < len(lines)-1 {
			b.WriteString("\r\n") // raw mode: no newline translation
		}
	}
	b.WriteString(clearBelow)
	_, err := io.WriteString(s.out, b.String())
	return err
}

// cut is l cut to w runes.
func cut(l string, w int) string {
	r := []rune(l)
	if len(r) <= w {
		return l
	}
	return string(r[:w])
}
