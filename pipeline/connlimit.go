package pipeline

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// limitListener serves at most max connections at once, and at most
// perAddr from one remote address; a connection past either is closed as
// soon as it is accepted, and counted.
//
// Not golang.org/x/net/netutil.LimitListener: that one stops calling
// Accept when it is full, so the connections past its cap wait in the
// kernel's accept queue where nothing counts them, a scraper among them
// waits for a slot until its own timeout, and once the queue is full the
// kernel drops new connections silently. Closing them at once costs an
// accept and a close, is counted (eaddr_metrics_connections_refused_total),
// and tells a scraper at once. The share per address keeps one pod from
// taking every slot, and with them the kubelet's probes (which come from
// the node's address): a probe that cannot connect would restart eaddr.
type limitListener struct {
	net.Listener
	max, perAddr int
	refused      atomic.Uint64
	open         atomic.Int64

	mu     sync.Mutex
	n      int
	byAddr map[netip.Addr]int
}

func newLimitListener(l net.Listener, max, perAddr int) *limitListener {
	return &limitListener{Listener: l, max: max, perAddr: perAddr, byAddr: map[netip.Addr]int{}}
}

// Accept returns the next connection within the limits; those past them
// are closed and counted, never waited on.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteAddr(c)
		if l.take(addr) {
			l.open.Add(1)
			return &limitedConn{Conn: c, release: func() { l.give(addr) }}, nil
		}
		l.refused.Add(1)
		c.Close()
	}
}

// take takes a slot for a connection from addr, if one is free.
func (l *limitListener) take(addr netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= l.max || l.byAddr[addr] >= l.perAddr {
		return false
	}
	l.n++
	l.byAddr[addr]++
	return true
}

// give returns addr's slot.
func (l *limitListener) give(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.byAddr[addr]--; l.byAddr[addr] == 0 {
		delete(l.byAddr, addr)
	}
	l.open.Add(-1)
}

// remoteAddr is c's peer address (IPv4 in IPv6 as IPv4); the zero Addr
// for a connection that is not TCP, which then shares one count.
func remoteAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// limitedConn gives its slot back when it is first closed (http.Server
// may close a connection more than once).
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
