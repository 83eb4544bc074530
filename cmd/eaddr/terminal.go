package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"golang.org/x/term"
)

// terminal is stdout when it is a terminal: a person reads it, so the
// human forms are the default there, and they keep to its width, read again
// when the window changes size (SIGWINCH), never on the path of an event.
type terminal struct {
	fd   int
	cols atomic.Int32
}

// stdoutTerminal is w as a terminal, or nil when w is not one (a pipe, a
// file, a log pipeline): JSON is the default there.
func stdoutTerminal(w io.Writer) *terminal {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	t := &terminal{fd: int(f.Fd())}
	t.measure()
	return t
}

func (t *terminal) measure() {
	if w, _, err := term.GetSize(t.fd); err == nil && w > 0 {
		t.cols.Store(int32(w))
	}
}

// watch measures the terminal again on every SIGWINCH until ctx ends.
func (t *terminal) watch(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				t.measure()
			}
		}
	}()
}

// Width is the terminal's columns now; 0 when they could not be read.
func (t *terminal) Width() int { return int(t.cols.Load()) }

// defaultFormat is the form a person gets at a terminal, JSON elsewhere.
func defaultOutput(t *terminal) string {
	if t != nil {
		return "text"
	}
	return "json"
}
