package snatlab

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// serve starts the server's TCP listener (both families), whose accepted
// connections are held until the lab closes, and a UDP socket that reads
// and answers nothing.
func (l *Lab) serve(t testing.TB) {
	t.Helper()
	ln, err := l.Server.Listen("tcp", ":"+strconv.Itoa(Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.keep(c)
		}
	}()
	var pc net.PacketConn
	err = l.Server.Do(func() (err error) {
		pc, err = net.ListenPacket("udp", ":"+strconv.Itoa(Port))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
}

func (l *Lab) keep(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conns = append(l.conns, c)
}

func (l *Lab) closeConns() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// Hold opens n TCP connections from pod i to the server in family 4 or 6
// and keeps them open until the lab closes: each holds one of the node's
// SNAT ports toward the server.
func (l *Lab) Hold(t testing.TB, i, n, family int) []net.Conn {
	t.Helper()
	dst := netip.AddrPortFrom(ServerAddr(family), Port).String()
	var held []net.Conn
	err := l.Pods[i].Do(func() error {
		for range n {
			c, err := net.DialTimeout("tcp", dst, 5*time.Second)
			if err != nil {
				return err
			}
			l.keep(c)
			held = append(held, c)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("pod %d holding %d connections to %s: %v", i, n, dst, err)
	}
	return held
}

// HoldUDP sends one datagram from each of n UDP sockets of pod i to the
// server and keeps the sockets: each conntrack entry holds an SNAT port
// for UDP's timeout (30 s unanswered).
func (l *Lab) HoldUDP(t testing.TB, i, n, family int) {
	t.Helper()
	dst := netip.AddrPortFrom(ServerAddr(family), Port).String()
	err := l.Pods[i].Do(func() error {
		for range n {
			c, err := net.Dial("udp", dst)
			if err != nil {
				return err
			}
			l.keep(c)
			if _, err := c.Write([]byte("x")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("pod %d sending from %d UDP sockets to %s: %v", i, n, dst, err)
	}
}

// ServerDst is the server's address and port in family 4 or 6.
func ServerDst(family int) string {
	return fmt.Sprintf("%s", netip.AddrPortFrom(ServerAddr(family), Port))
}

// Nowhere is an address the node routes to the server, which neither has
// it nor forwards: its SYNs leave the node and are never answered (the
// server's kernel drops them as not its own, a reason eaddr does not
// watch), as a destination beyond the node that does not answer.
var Nowhere = netip.MustParseAddr("203.0.113.9")

// RouteNowhere adds the node's route to Nowhere.
func (l *Lab) RouteNowhere(t testing.TB) {
	t.Helper()
	l.Run(t, l.Node, "ip", "route", "add", Nowhere.String()+"/32", "via", ServerAddr(4).String())
}

// Sandbox starts a process in the node's netns, as a node has (eaddr
// reaches a netns through a process in it); it ends with the test.
func (l *Lab) Sandbox(t testing.TB) {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	if err := l.Node.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}
