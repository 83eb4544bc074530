package netns

// What is built inside a namespace for the demo and the tests: sockets made
// in it (Listen, Dial) and a namespace whose ephemeral ports are all held
// (Exhaust). netns.go enters and makes namespaces.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// checkLiteral rejects host names for IP networks. Resolving a name could run
// DNS queries on other threads (in the host's namespace), and a name with
// several addresses makes Go dial them from parallel goroutines, whose
// sockets would then be created outside n.
func checkLiteral(op, network, address string) error {
	var host string
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
		h, _, err := net.SplitHostPort(address)
		if err != nil {
			return &net.OpError{Op: op, Net: network, Err: err}
		}
		host = h
	default:
		if !strings.HasPrefix(network, "ip") {
			return nil // unix, unixgram, unixpacket: no resolution
		}
		host = address
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return &net.OpError{Op: op, Net: network,
			Err: fmt.Errorf("netns: %q is not an IP literal (names are not resolved inside a namespace)", host)}
	}
	return nil
}

// Listen announces on the local network address with net.Listen semantics,
// with the socket created inside n. The host part of address must be an IP
// literal or empty. The listener can then be used from any goroutine.
func (n *NS) Listen(network, address string) (net.Listener, error) {
	if err := checkLiteral("listen", network, address); err != nil {
		return nil, err
	}
	var l net.Listener
	err := n.Do(func() error {
		var err error
		var lc net.ListenConfig
		l, err = lc.Listen(context.Background(), network, address)
		return err
	})
	return l, err
}

// Dial connects to address with net.Dial semantics and a 2s timeout, with the
// socket created inside n. The host part of address must be an IP literal.
// Errors wrap the syscall errno, e.g. errors.Is(err, unix.EADDRNOTAVAIL) when
// n has run out of ephemeral ports.
func (n *NS) Dial(network, address string) (net.Conn, error) {
	if err := checkLiteral("dial", network, address); err != nil {
		return nil, err
	}
	var c net.Conn
	err := n.Do(func() error {
		// With a single literal address Go dials serially on this goroutine;
		// FallbackDelay<0 also rules out Happy Eyeballs goroutines.
		d := net.Dialer{Timeout: dialTimeout, FallbackDelay: -1}
		var err error
		c, err = d.Dial(network, address)
		return err
	})
	return c, err
}

// Exhausted is a namespace whose ephemeral port range holds exactly len(Held)
// ports, all of them used by connections to one listener, so any new
// connect() to Listener's address fails with EADDRNOTAVAIL.
type Exhausted struct {
	NS       *NS
	Listener net.Listener // e.g. 127.0.0.1:8080
	Held     []net.Conn   // client sides of the held connections
	accepted []net.Conn   // server sides, kept open

	mu        sync.Mutex    // guards accepted
	gotConn   chan struct{} // one token per accepted connection
	acceptErr error         // set by the accept loop when it stops
	done      chan struct{} // closed when the accept loop has stopped
	closeOnce sync.Once
	closeErr  error
}

// Exhaust sets net.ipv4.ip_local_port_range to "lo hi" in ns (the range also
// applies to IPv6), listens on network/address (e.g. "tcp4", "127.0.0.1:8080"
// or "tcp6", "[::1]:8080"), dials it hi-lo+1 times and keeps every connection
// open (an accept loop in a goroutine keeps the server sides), then checks
// that one more dial fails with EADDRNOTAVAIL and returns an error saying so
// if it does not. The listener's port must lie outside [lo, hi]. On error
// everything opened so far is closed; ns itself is never closed.
func Exhaust(ns *NS, network, address string, lo, hi int) (*Exhausted, error) {
	if lo < 1 || hi > 65535 || lo > hi {
		return nil, fmt.Errorf("netns: Exhaust: invalid port range %d-%d", lo, hi)
	}
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi)); err != nil {
		return nil, fmt.Errorf("netns: Exhaust: %w", err)
	}
	l, err := ns.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("netns: Exhaust: %w", err)
	}
	if ta, ok := l.Addr().(*net.TCPAddr); ok && ta.Port >= lo && ta.Port <= hi {
		l.Close()
		return nil, fmt.Errorf("netns: Exhaust: listener port %d lies inside the ephemeral range %d-%d", ta.Port, lo, hi)
	}
	count := hi - lo + 1
	e := &Exhausted{
		NS:       ns,
		Listener: l,
		gotConn:  make(chan struct{}, count+1),
		done:     make(chan struct{}),
	}
	go e.acceptLoop()
	fail := func(err error) (*Exhausted, error) {
		e.Close()
		return nil, fmt.Errorf("netns: Exhaust %s %s range %d-%d: %w", network, l.Addr(), lo, hi, err)
	}

	target := l.Addr().String()
	for i := 0; i < count; i++ {
		c, err := ns.Dial(network, target)
		if err != nil {
			return fail(fmt.Errorf("dial %d of %d: %w", i+1, count, err))
		}
		e.Held = append(e.Held, c)
	}
	timeout := time.NewTimer(dialTimeout)
	defer timeout.Stop()
	for i := 0; i < count; i++ {
		select {
		case <-e.gotConn:
		case <-e.done:
			return fail(fmt.Errorf("accept loop stopped after %d of %d connections: %w", i, count, e.acceptErr))
		case <-timeout.C:
			return fail(fmt.Errorf("only %d of %d connections accepted within %v", i, count, dialTimeout))
		}
	}

	c, err := ns.Dial(network, target)
	if err == nil {
		local := c.LocalAddr()
		c.Close()
		return fail(fmt.Errorf("range not exhausted: dial %d succeeded from %s, want EADDRNOTAVAIL", count+1, local))
	}
	if !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fail(fmt.Errorf("dial %d failed, but not with EADDRNOTAVAIL: %w", count+1, err))
	}
	return e, nil
}

// acceptLoop keeps the server side of every connection until the listener is
// closed.
func (e *Exhausted) acceptLoop() {
	defer close(e.done)
	for {
		c, err := e.Listener.Accept()
		if err != nil {
			e.acceptErr = err
			return
		}
		e.mu.Lock()
		e.accepted = append(e.accepted, c)
		e.mu.Unlock()
		select {
		case e.gotConn <- struct{}{}:
		default:
		}
	}
}

// Close closes the held connections (both sides) and the listener, and waits
// for the accept loop to stop. It does not close the NS. It is idempotent.
func (e *Exhausted) Close() error {
	e.closeOnce.Do(func() {
		if err := e.Listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			e.closeErr = err
		}
		<-e.done
		for _, c := range e.Held {
			c.Close()
		}
		e.mu.Lock()
		for _, c := range e.accepted {
			c.Close()
		}
		e.accepted = nil
		e.mu.Unlock()
	})
	return e.closeErr
}
