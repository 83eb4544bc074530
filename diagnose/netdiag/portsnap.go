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
// BPF iterators). It is an interface so that netdiag does not load BPF.
type SocketReader interface {
	Read(netnsInode uint64) ([]portmodel.Socket, error)
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
// it. The sockets come from it when it is not nil and reads them; otherwise
// from sock_diag (DumpSockets), with only what sock_diag can prove, and
// Source says why. The error is for what neither can answer.
func (n *Netns) PortSnapshot(it SocketReader, udp bool) (portmodel.Sysctls, []portmodel.Socket, Source, error) {
	ps, err := n.Sysctls()
	if err != nil {
		return portmodel.Sysctls{}, nil, "", err
	}
	sys := portmodel.Sysctls{Lo: ps.RangeLo, Hi: ps.RangeHi, TWReuse: ps.TCPTWReuse}
	for _, r := range ps.Reserved {
		sys.Reserved = append(sys.Reserved, portmodel.Span{Lo: r.Lo, Hi: r.Hi})
	}
	var socks []portmodel.Socket
	var itErr error
	err = n.ns.Do(func() error {
		var err error
		if sys.TWReuseDelayMS, err = twReuseDelay(); err != nil {
			return err
		}
		if it != nil {
			socks, itErr = it.Read(n.inode)
		}
		return nil
	})
	if err != nil {
		return portmodel.Sysctls{}, nil, "", fmt.Errorf("netdiag: PortSnapshot in %s: %w", nsLink(n.inode), err)
	}
	src := SourceIterator
	switch {
	case it == nil:
		src = "sock_diag: no socket iterator"
	case itErr != nil:
		src = Source("sock_diag: the socket iterator failed: " + itErr.Error())
	}
	if src != SourceIterator {
		diag, err := n.DumpSockets(udp)
		if err != nil {
			return portmodel.Sysctls{}, nil, "", fmt.Errorf("netdiag: PortSnapshot (%s): %w", src, err)
		}
		socks = FromSockDiag(diag)
	} else if !udp {
		socks = OnlyTCP(socks)
	}
	// After the sockets: no stamp read is later than Now.
	if sys.NowSec, sys.NowMS, err = portmodel.KernelClock(); err != nil {
		return portmodel.Sysctls{}, nil, "", fmt.Errorf("netdiag: PortSnapshot: %w", err)
	}
	return sys, socks, src, nil
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
	for _, d := range diag {
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
		socks = append(socks, s)
	}
	return socks
}
