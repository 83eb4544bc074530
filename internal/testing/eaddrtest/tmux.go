package eaddrtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/termtext"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TmuxPane is a command running in a real terminal: a tmux server of its
// own (-L), its one pane cols × rows, killed when the test ends.
type TmuxPane struct {
	t    *testing.T
	tmux string
	sock string
	cols int
}

var TmuxServers atomic.Int32

func StartTmux(t *testing.T, cols, rows int, command string) *TmuxPane {
	t.Helper()
	p := &TmuxPane{t: t, tmux: testenv.Program(t, "tmux", "tmux"), cols: cols,
		sock: fmt.Sprintf("eaddr-test-%d-%d", os.Getpid(), TmuxServers.Add(1))}
	t.Cleanup(func() { exec.Command(p.tmux, "-L", p.sock, "kill-server").Run() })
	// The pane stays after the command exits, so that what it printed last
	// can still be read: set in the server's config, before the command
	// starts, so that a command quicker than a second tmux call is kept too.
	// The shell is /bin/sh, named: without it tmux takes $SHELL, else the
	// user's login shell, and CI's make test-race runs this as nobody with
	// no $SHELL, whose login shell (nologin) runs nothing and exits 1.
	conf := filepath.Join(t.TempDir(), "tmux.conf")
	if err := os.WriteFile(conf, []byte("set-option -g remain-on-exit on\nset-option -g default-shell /bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-L", p.sock, "-f", conf, "new-session", "-d", "-x", fmt.Sprint(cols), "-y", fmt.Sprint(rows), command}
	if out, err := exec.Command(p.tmux, args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	return p
}

func (p *TmuxPane) Keys(k ...string) {
	p.t.Helper()
	if out, err := exec.Command(p.tmux, append([]string{"-L", p.sock, "send-keys"}, k...)...).CombinedOutput(); err != nil {
		p.t.Fatalf("tmux send-keys: %v: %s", err, out)
	}
}

// Capture is the screen as the person sees it, one line per row.
func (p *TmuxPane) Capture() string {
	p.t.Helper()
	out, err := exec.Command(p.tmux, "-L", p.sock, "capture-pane", "-p").CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux capture-pane: %v: %s", err, out)
	}
	return string(out)
}

// History is everything the pane printed, its scrollback too, with the
// lines the terminal wrapped joined again (capture-pane -J): a line longer
// than the pane is one the person saw wrapped.
func (p *TmuxPane) History() string {
	p.t.Helper()
	out, err := exec.Command(p.tmux, "-L", p.sock, "capture-pane", "-p", "-J", "-S", "-").CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux capture-pane: %v: %s", err, out)
	}
	return string(out)
}

// NoWrapped fails for each line of history that the terminal wrapped.
func (p *TmuxPane) NoWrapped(history string) {
	p.t.Helper()
	for _, l := range strings.Split(history, "\n") {
		if w := termtext.Columns(l); w > p.cols {
			p.t.Errorf("a line of %d columns wrapped in the %d-column terminal:\n%s", w, p.cols, l)
		}
	}
}

// TopDeadline bounds each wait for the screen: generous, not a measure.
const TopDeadline = 2 * time.Minute

// WaitFor polls the pane until ok says yes, or fails after topDeadline.
func (p *TmuxPane) WaitFor(what string, ok func(screen string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(TopDeadline)
	for {
		s := p.Capture()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the screen never showed %s:\n%s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
