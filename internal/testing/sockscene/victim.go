package sockscene

import (
	"fmt"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// call is one connect() or bind() the test process makes inside the netns.
type call struct {
	sys    string         // "connect" or "bind"
	proto  string         // "tcp" or "udp"
	local  netip.AddrPort // bound first (connect) or the bind's address; zero: none
	remote netip.AddrPort // connect's destination
	reuse  bool           // SO_REUSEADDR on the new socket
}

// attempt makes c on a new socket and returns the errno of the call, 0 if
// it succeeded (the socket is then closed without leaving TIME_WAIT). An
// error is returned for failures that are not the call's: socket(), or a
// bind that a connect needed first.
func (r *rig) attempt(c call) (syscall.Errno, error) {
	v6 := c.local.Addr().Is6() || c.remote.Addr().Is6()
	fd, err := r.rawSocket(c.proto, v6, c.reuse)
	if err != nil {
		return 0, err
	}
	defer r.closeRST(fd)
	if c.local.IsValid() {
		if err := unix.Bind(fd, sockaddr(c.local)); err != nil {
			if c.sys == "bind" {
				return errnoOf(err), nil
			}
			return 0, fmt.Errorf("bind %s before connect: %w", c.local, err)
		}
	}
	if c.sys == "connect" {
		return errnoOf(unix.Connect(fd, sockaddr(c.remote))), nil
	}
	return 0, nil
}

// victim makes the scene's failing call from the test process and records
// it; the test fails if the call succeeded.
func (r *rig) victim(s *Scene, c call) {
	r.t.Helper()
	s.Sys, s.Proto, s.Local, s.Remote = c.sys, c.proto, c.local, c.remote
	s.VictimPID = os.Getpid()
	e, err := r.attempt(c)
	r.must(err, "the victim's call")
	if e == 0 {
		r.fatalf("%s %s %s->%s succeeded: the failure was not reproduced", c.proto, c.sys, c.local, c.remote)
	}
	s.Errno = e
}

// probe makes c and returns whether it succeeded, and its errno if not.
func (r *rig) probe(c call) (bool, syscall.Errno) {
	r.t.Helper()
	e, err := r.attempt(c)
	r.must(err, "probe "+c.sys)
	return e == 0, e
}
