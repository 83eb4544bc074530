package netdiag

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// SocketReader reads every TCP and UDP socket of the netns netnsInode, from
// the calling thread, which is inside that netns (tracer.SockIter does, with
// BPF iterators), handing each to fn as it is read (valid during the call
// only). It is an interface so that netdiag does not load BPF.
type SocketReader interface {
	Each(netnsInode uint64, fn func(*portmodel.Socket)) error
}

// Source says where a PortSnapshot's sockets came from: SourceIterator, or
// "sock_diag: " and why the iterator was not used. With sock_diag the
// sockets' bind buckets (but a listener's), options and TIME_WAIT stamps are
// unknown, and the sockets that are only bound are missing.
type Source string

// SourceIterator: the sockets were read by the SocketReader.
const SourceIterator Source = "iterator"

// PortSnapshot reads what the port model needs of the netns: its sysctls,
// its clock, and its sockets (UDP ones only with udp), from threads inside
// it, as EachPortSocket reads them: those keep takes (nil: all), at most
// max of them (0: no bound); cut counts those past max. The clock is read
// after the sockets: no TIME_WAIT stamp read is later than Now.
func (n *Netns) PortSnapshot(it SocketReader, udp bool, keep func(*portmodel.Socket) bool, max int) (sys portmodel.Sysctls, socks []portmodel.Socket, src Source, cut int, err error) {
	if sys, _, err = n.PortSettings(); err != nil {
		return portmodel.Sysctls{}, nil, "", 0, err
	}
	src, err = n.EachPortSocket(it, udp, func(s *portmodel.Socket) {
		switch {
		case keep != nil && !keep(s):
		case max > 0 && len(socks) >= max:
			cut++
		default:
			socks = append(socks, *s)
		}
	})
	if err != nil {
		return portmodel.Sysctls{}, nil, "", 0, err
	}
	if sys.NowSec, sys.NowMS, err = portmodel.KernelClock(); err != nil {
		return portmodel.Sysctls{}, nil, "", 0, fmt.Errorf("netdiag: PortSnapshot: %w", err)
	}
	return sys, socks, src, cut, nil
}

// PortSettings are the netns's settings the port model reads (its range,
// reserved ports, tcp_tw_reuse and tcp_tw_reuse_delay; not the clock), and
// its port sysctls as Sysctls reads them.
func (n *Netns) PortSettings() (portmodel.Sysctls, PortSysctls, error) {
	ps, err := n.Sysctls()
	if err != nil {
		return portmodel.Sysctls{}, ps, err
	}
	sys := ps.Model()
	err = n.ns.Do(func() error {
		var err error
		sys.TWReuseDelayMS, err = twReuseDelay()
		return err
	})
	if err != nil {
		return portmodel.Sysctls{}, ps, fmt.Errorf("netdiag: PortSettings in %s: %w", nsLink(n.inode), err)
	}
	return sys, ps, nil
}

// Model is s as the port model takes it, without tcp_tw_reuse_delay and the
// clock.
func (s *PortSysctls) Model() portmodel.Sysctls {
	sys := portmodel.Sysctls{Lo: s.RangeLo, Hi: s.RangeHi, TWReuse: s.TCPTWReuse}
	for _, r := range s.Reserved {
		sys.Reserved = append(sys.Reserved, portmodel.Span{Lo: r.Lo, Hi: r.Hi})
	}
	return sys
}

// EachPortSocket hands each socket of the netns to each as it is read
// (UDP ones only with udp), nothing kept: from it when it is not nil and
// reads them; otherwise from sock_diag (EachSocket), with only what
// sock_diag can prove (FromSockDiag), and Source says why. An iterator that
// fails after it handed sockets on is an error, not a reason to read them
// again from sock_diag. each runs on a thread inside the netns.
func (n *Netns) EachPortSocket(it SocketReader, udp bool, each func(*portmodel.Socket)) (Source, error) {
	src := Source("sock_diag: no socket iterator")
	if it != nil {
		handed := 0
		var itErr error
		err := n.ns.Do(func() error {
			itErr = it.Each(n.inode, func(s *portmodel.Socket) {
				if udp || s.Proto == portmodel.TCP {
					handed++
					each(s)
				}
			})
			return nil
		})
		switch {
		case err != nil:
			return "", fmt.Errorf("netdiag: EachPortSocket in %s: %w", nsLink(n.inode), err)
		case itErr == nil:
			return SourceIterator, nil
		case handed > 0:
			return "", fmt.Errorf("netdiag: the socket iterator failed in %s after %d sockets: %w", nsLink(n.inode), handed, itErr)
		}
		src = Source("sock_diag: the socket iterator failed: " + itErr.Error())
	}
	err := n.EachSocket(udp, func(d *Socket) {
		s := FromSockDiagOne(d)
		each(&s)
	})
	if err != nil {
		return "", fmt.Errorf("netdiag: EachPortSocket (%s): %w", src, err)
	}
	return src, nil
}

// twReuseDelay reads net.ipv4.tcp_tw_reuse_delay (ms, 6.13+) from a thread
// inside the netns; -1 where the kernel has no such sysctl.
func twReuseDelay() (int, error) {
	b, err := os.ReadFile(sysctlDir + "tcp_tw_reuse_delay")
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("net.ipv4.tcp_tw_reuse_delay=%q: %w", b, err)
	}
	return v, nil
}

// OnlyTCP keeps the TCP sockets of socks, in place (socks's array is
// reused).
func OnlyTCP(socks []portmodel.Socket) []portmodel.Socket {
	out := socks[:0]
	for _, s := range socks {
		if s.Proto == portmodel.TCP {
			out = append(out, s)
		}
	}
	return out
}

// FromSockDiag maps sock_diag's sockets to the port model's, with only what
// sock_diag proves. The bucket of a listener's port, and of a TCP socket in
// CLOSE that sock_diag shows (6.7+ dumps the sockets that are only bound),
// was made by bind() or has counted as such since: listen() binds; a
// connect() port is given back when its socket closes (tcp_set_state:
// inet_put_port) unless bind() chose it (SOCK_BINDPORT_LOCK); and a bind()
// into a bucket leaves its fastreuseport >= 0 (inet_csk_update_fastreuse).
// A socket in FIN_WAIT1, FIN_WAIT2, CLOSING or LAST_ACK without an inode is
// an orphan: only close() gets it there and leaves it no file. The other
// buckets, the options (Known false) and the TIME_WAIT stamps (TW.Known
// false) are unknown.
func FromSockDiag(diag []Socket) []portmodel.Socket {
	socks := make([]portmodel.Socket, 0, len(diag))
	for i := range diag {
		socks = append(socks, FromSockDiagOne(&diag[i]))
	}
	return socks
}

// FromSockDiagOne is FromSockDiag of one socket.
func FromSockDiagOne(d *Socket) portmodel.Socket {
	s := portmodel.Socket{Proto: portmodel.Proto(d.Proto), State: d.State, Local: d.Local, UID: d.UID, Inode: d.Inode}
	if d.Remote.Port() != 0 || !d.Remote.Addr().IsUnspecified() {
		s.Remote = d.Remote
	}
	if s.Proto == portmodel.TCP {
		switch d.State {
		case StateListen, StateClose:
			s.Bucket = portmodel.BucketByBind
		case StateFinWait1, StateFinWait2, StateClosing, StateLastAck:
			s.Orphan = d.Inode == 0
		}
	}
	return s
}
