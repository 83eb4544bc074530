package netdiag

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// TCPSysctls are the TCP settings of a netns that a fix depends on: which
// TIME_WAIT ports a connect() may reuse, and how long orphans live.
type TCPSysctls struct {
	Timestamps   int // net.ipv4.tcp_timestamps: TIME_WAIT reuse needs them
	FinTimeout   int // net.ipv4.tcp_fin_timeout, seconds an orphan stays in FIN_WAIT2
	TWReuse      int // net.ipv4.tcp_tw_reuse: 0, 1, 2 (loopback only)
	TWReuseDelay int // net.ipv4.tcp_tw_reuse_delay in ms (6.13+); -1 where the kernel has none (1 s)
}

// TCPSysctls reads them from one thread inside the netns.
func (n *Netns) TCPSysctls() (TCPSysctls, error) {
	s := TCPSysctls{TWReuseDelay: -1}
	vals := []*int{&s.Timestamps, &s.FinTimeout, &s.TWReuse, &s.TWReuseDelay}
	names := []string{"tcp_timestamps", "tcp_fin_timeout", "tcp_tw_reuse", "tcp_tw_reuse_delay"}
	err := n.ns.Do(func() error {
		for i, name := range names {
			b, err := os.ReadFile(sysctlDir + name)
			if errors.Is(err, fs.ErrNotExist) && name == "tcp_tw_reuse_delay" {
				continue // older kernels: the delay is one second, fixed
			}
			if err != nil {
				return err
			}
			if *vals[i], err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				return fmt.Errorf("net.ipv4.%s=%q: %w", name, b, err)
			}
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("netdiag: TCP sysctls in %s: %w", nsLink(n.inode), err)
	}
	return s, nil
}
