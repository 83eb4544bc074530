package demo

import (
	"bytes"
	"context"
	"os/exec"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
)

// RunIn runs argv inside ns with stdin closed, and returns its combined
// output and pid. timeout bounds the client: the demo waits 10 s, as a person
// would; the tests, whose clients may run under emulation or on a loaded
// machine, wait longer. A client that exits non-zero is no error; one cut by
// the timeout is.
func RunIn(ctx context.Context, ns *netns.NS, argv []string, timeout time.Duration) (string, int, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		return "", 0, err
	}
	pid := cmd.Process.Pid
	err := cmd.Wait()
	if _, exited := err.(*exec.ExitError); exited && cctx.Err() == nil {
		err = nil
	}
	return out.String(), pid, err
}
