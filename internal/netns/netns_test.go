package netns

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

const portRange = "net.ipv4.ip_local_port_range"

// newNS creates a namespace for the test and closes it on cleanup. It also
// registers a check that, after the test, no thread of this process was left
// inside a foreign network namespace.
func newNS(t *testing.T) *NS {
	t.Helper()
	testenv.RequireRoot(t)
	host := hostNetNS(t)
	ns, err := New()
	if errors.Is(err, unix.EPERM) {
		testenv.Skip(t, fmt.Sprintf("creating a network namespace is not permitted here: %v", err))
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := ns.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		checkThreads(t, host)
	})
	return ns
}

// hostNetNS returns the inode of this process's network namespace.
func hostNetNS(t *testing.T) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// checkThreads verifies that every thread of the process is in the host's
// network namespace, i.e. Do/New always switched their threads back (or let
// them die).
func checkThreads(t *testing.T, host uint64) {
	t.Helper()
	links, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]", host)
	for _, l := range links {
		got, err := os.Readlink(l)
		if err != nil {
			continue // thread exited meanwhile
		}
		if got != want {
			t.Errorf("%s = %s, want host %s", l, got, want)
		}
	}
}

func readHostSysctl(t *testing.T, name string) string {
	t.Helper()
	// Read from a locked thread that is known to be in the host namespace.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestNew(t *testing.T) {
	ns := newNS(t)
	host := hostNetNS(t)
	if ns.Inode() == 0 || ns.Inode() == host {
		t.Fatalf("Inode = %d, host netns inode = %d; want a different, non-zero inode", ns.Inode(), host)
	}
	link, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if link == ns.String() {
		t.Fatalf("/proc/self/ns/net = %s, same as the new namespace", link)
	}

	// The fd really refers to the namespace the code runs in under Do.
	err = ns.Do(func() error {
		got, err := os.Readlink("/proc/thread-self/ns/net")
		if err != nil {
			return err
		}
		if got != ns.String() {
			return fmt.Errorf("inside Do: /proc/thread-self/ns/net = %s, want %s", got, ns)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Loopback is up: listen and dial over IPv4 and IPv6 inside.
	for _, tc := range []struct{ network, addr string }{
		{"tcp4", "127.0.0.1:0"},
		{"tcp6", "[::1]:0"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			l, err := ns.Listen(tc.network, tc.addr)
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			t.Cleanup(func() { l.Close() })
			accepted := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err == nil {
					_, err = c.Write([]byte("hi"))
					c.Close()
				}
				accepted <- err
			}()
			c, err := ns.Dial(tc.network, l.Addr().String())
			if err != nil {
				t.Fatalf("Dial %s: %v", l.Addr(), err)
			}
			t.Cleanup(func() { c.Close() })
			b, err := io.ReadAll(c)
			if err != nil || string(b) != "hi" {
				t.Fatalf("read %q, %v; want \"hi\"", b, err)
			}
			if err := <-accepted; err != nil {
				t.Fatalf("accept: %v", err)
			}
		})
	}

	// A socket created by Listen belongs to ns (asked from the kernel with
	// SIOCGSKNS, without sending any traffic).
	l, err := ns.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := socketNetNS(t, l.(*net.TCPListener)); got != ns.Inode() {
		t.Fatalf("listener socket is in netns %d, want %d", got, ns.Inode())
	}
}

// socketNetNS returns the network namespace inode of a socket via
// SIOCGSKNS.
func socketNetNS(t *testing.T, l interface {
	File() (*os.File, error)
}) uint64 {
	t.Helper()
	f, err := l.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nsfd, err := unix.IoctlRetInt(int(f.Fd()), unix.SIOCGSKNS)
	if err != nil {
		t.Fatalf("SIOCGSKNS: %v", err)
	}
	defer unix.Close(nsfd)
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestListenRejectsNames(t *testing.T) {
	ns := newNS(t)
	if l, err := ns.Listen("tcp", "localhost:0"); err == nil {
		l.Close()
		t.Fatal("Listen with a host name succeeded, want error")
	}
	if c, err := ns.Dial("tcp", "localhost:1"); err == nil {
		c.Close()
		t.Fatal("Dial with a host name succeeded, want error")
	}
}

func TestSysctl(t *testing.T) {
	ns := newNS(t)
	hostBefore := readHostSysctl(t, portRange)
	t.Cleanup(func() {
		if after := readHostSysctl(t, portRange); after != hostBefore {
			t.Errorf("host %s changed: %q -> %q", portRange, hostBefore, after)
		}
	})

	for _, tc := range []struct{ name, value, want string }{
		{portRange, "40000 40001", "40000\t40001"},
		{"net/ipv4/ip_local_port_range", "41000 41999", "41000\t41999"},
	} {
		if err := ns.SetSysctl(tc.name, tc.value); err != nil {
			t.Fatalf("SetSysctl(%q, %q): %v", tc.name, tc.value, err)
		}
		got, err := ns.Sysctl(tc.name)
		if err != nil {
			t.Fatalf("Sysctl(%q): %v", tc.name, err)
		}
		if got != tc.want {
			t.Fatalf("Sysctl(%q) = %q, want %q", tc.name, got, tc.want)
		}
		if host := readHostSysctl(t, portRange); host != hostBefore {
			t.Fatalf("host %s changed to %q (was %q)", portRange, host, hostBefore)
		}
	}

	for _, bad := range []string{"", "kernel.pid_max", "net/../kernel/pid_max", "/net/ipv4/../../kernel/pid_max", "net"} {
		if err := ns.SetSysctl(bad, "1"); err == nil {
			t.Errorf("SetSysctl(%q) succeeded, want error", bad)
		}
	}
}

func TestStart(t *testing.T) {
	ns := newNS(t)
	// Control: a plain exec from the test stays in the host namespace, so the
	// checks below can tell the difference.
	out, err := exec.Command("/bin/sh", "-c", "readlink /proc/$$/ns/net").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, host := strings.TrimSpace(string(out)), fmt.Sprintf("net:[%d]", hostNetNS(t)); got != host {
		t.Fatalf("control exec: netns %q, want host %q", got, host)
	}

	// The shell prints its own pid, its own netns (/proc/$$) and that of a
	// child (readlink's /proc/self), then blocks on stdin so the test can
	// inspect /proc/PID/ns/net of the live process from the host.
	cmd := exec.Command("/bin/sh", "-c", `echo $$; readlink /proc/$$/ns/net; readlink /proc/self/ns/net; read x || :`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := ns.Start(cmd); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	sc := bufio.NewScanner(stdout)
	var lines []string
	for len(lines) < 3 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 3 {
		t.Fatalf("child printed %q (scan err %v), want 3 lines", lines, sc.Err())
	}
	if pid, err := strconv.Atoi(lines[0]); err != nil || pid != cmd.Process.Pid {
		t.Errorf("child's $$ = %q, cmd.Process.Pid = %d", lines[0], cmd.Process.Pid)
	}
	want := ns.String()
	if lines[1] != want {
		t.Errorf("shell's /proc/$$/ns/net = %q, want %q", lines[1], want)
	}
	if lines[2] != want {
		t.Errorf("grandchild's /proc/self/ns/net = %q, want %q", lines[2], want)
	}
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("host view of /proc/%d/ns/net = %q, want %q", cmd.Process.Pid, got, want)
	}
}

func TestExhaust(t *testing.T) {
	for _, tc := range []struct{ network, address string }{
		{"tcp4", "127.0.0.1:8080"},
		{"tcp6", "[::1]:8080"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			ns := newNS(t)
			hostBefore := readHostSysctl(t, portRange)
			e, err := Exhaust(ns, tc.network, tc.address, 40000, 40001)
			if err != nil {
				t.Fatalf("Exhaust: %v", err)
			}
			t.Cleanup(func() {
				if err := e.Close(); err != nil {
					t.Errorf("Exhausted.Close: %v", err)
				}
				if err := e.Close(); err != nil {
					t.Errorf("second Exhausted.Close: %v", err)
				}
			})
			if len(e.Held) != 2 {
				t.Fatalf("len(Held) = %d, want 2", len(e.Held))
			}
			if got := e.Listener.Addr().String(); got != tc.address {
				t.Errorf("listener address = %s, want %s", got, tc.address)
			}
			for _, c := range e.Held {
				if p := c.LocalAddr().(*net.TCPAddr).Port; p < 40000 || p > 40001 {
					t.Errorf("held connection local address %s not in 40000-40001", c.LocalAddr())
				}
			}
			c, err := ns.Dial(tc.network, tc.address)
			if err == nil {
				c.Close()
				t.Fatalf("third Dial succeeded from %s, want EADDRNOTAVAIL", c.LocalAddr())
			}
			if !errors.Is(err, unix.EADDRNOTAVAIL) {
				t.Fatalf("third Dial: %v, want EADDRNOTAVAIL", err)
			}
			t.Logf("third Dial: %v", err)
			if after := readHostSysctl(t, portRange); after != hostBefore {
				t.Errorf("host %s changed: %q -> %q", portRange, hostBefore, after)
			}
		})
	}
}

func TestDo(t *testing.T) {
	ns := newNS(t)
	errBoom := errors.New("boom")
	if err := ns.Do(func() error { return errBoom }); !errors.Is(err, errBoom) {
		t.Errorf("Do returned %v, want %v", err, errBoom)
	}
	func() {
		defer func() {
			if p := recover(); p != "panic in fn" {
				t.Errorf("recovered %v, want the panic from fn", p)
			}
		}()
		ns.Do(func() error { panic("panic in fn") })
	}()
	if err := ns.Do(func() error { runtime.Goexit(); return nil }); err == nil {
		t.Error("Do with runtime.Goexit returned nil, want error")
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: %v, want ErrClosed", err)
	}
	if ns.Inode() == 0 {
		t.Error("Inode after Close = 0")
	}
}
