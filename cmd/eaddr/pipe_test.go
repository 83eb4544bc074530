package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// A reader that closed stdout (eaddr top | head -1) got what it wanted:
// every command exits 0, as trace does, and says nothing on stderr about it.
func TestClosedStdoutExitsZero(t *testing.T) {
	testenv.RequireRoot(t)                // top and check need to see every netns
	ns := testns.New(t)                   // clean: check's own status is 0 there
	sleep := exec.Command("sleep", "600") // a process to enter the netns through
	if err := ns.Start(sleep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	clean := strconv.FormatUint(ns.Inode(), 10)
	for _, args := range [][]string{
		{"explain", "Cannot assign requested address"},
		{"top", "--once", "--interval", "100ms"},
		{"top", "--interval", "100ms"}, // piped: a table every interval until a write fails
		{"check", "--netns", clean},
		{"check", "--netns", clean, "-o", "json"},
		{"version"},
		{"trace", "--help"},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close() // the reader is gone before eaddr writes
		cmd := exec.Command(eaddrtest.EaddrBin, args...)
		var errOut strings.Builder
		cmd.Stdout, cmd.Stderr = w, &errOut
		err = cmd.Run()
		w.Close()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != 0 {
			t.Errorf("eaddr %q with stdout closed: exit %d, stderr %q; want 0", args, code, errOut.String())
		}
	}
}
