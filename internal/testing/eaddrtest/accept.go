package eaddrtest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// AcceptAll accepts on l until the test ends, then closes l: each
// connection is closed at once, or with hold kept open (never read or
// written) until then. It returns how many it has accepted so far.
func AcceptAll(t testing.TB, l net.Listener, hold bool) *atomic.Int64 {
	accepted := new(atomic.Int64)
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			if !hold {
				c.Close()
				continue
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	return accepted
}
