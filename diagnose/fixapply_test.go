package diagnose

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// How a fix's settings are applied, as its words say.
const (
	viaPod   = "pod"   // spec.securityContext.sysctls: set as the kubelet sets them
	viaEnter = "enter" // nsenter -t PID -n or ip netns exec NAME, then sysctl -w ...: run as printed, from the node
	viaHost  = "host"  // sysctl -w ... on the node: run as printed, inside the netns that plays the node
)

var (
	podSysctlRe = regexp.MustCompile(`\{name: (net\.ipv4\.[a-z_]+), value: "([^"]*)"\}`)
	commandRe   = regexp.MustCompile(`(nsenter -t \d+ -n |ip netns exec [A-Za-z0-9._:+-]+ |nsenter --net=/\S+ )?sysctl -w net\.ipv4\.[a-z_]+=(?:"[^"]*"|[0-9,-]+)(?: net\.ipv4\.[a-z_]+=(?:"[^"]*"|[0-9,-]+))*`)
	assignRe    = regexp.MustCompile(`(net\.ipv4\.[a-z_]+)=(?:"([^"]*)"|([0-9,-]+))`)
	claimRe     = regexp.MustCompile(`gives (\d+) ports?|leaving (\d+) ports? of (?:the range|\d+-\d+) usable`)
)

// applyFix applies the settings fix prints to f's netns, the way via says
// (the command run as printed, or a pod's sysctls set as the kubelet sets
// them), with every socket the netns served on closed as in a restart of
// its programs. Then it asks the kernel which ports connect() gets
// (kernelGives): exactly as many as the fix claims, none the netns serves
// on, none in [avoidLo, avoidHi] (the NodePort range, for the node), and a
// program that binds a served port again gets it, even while the range
// around it is full, and serves on it.
func applyFix(t *testing.T, f *fixNetns, fix, via string, avoidLo, avoidHi int) {
	t.Helper()
	claim := claimRe.FindStringSubmatch(fix)
	if claim == nil {
		t.Fatalf("fix %q claims no count of ports", fix)
	}
	want, _ := strconv.Atoi(claim[1] + claim[2])
	f.restart()
	applyAsPrinted(t, f, fix, via)
	got := kernelGives(t, f)
	if len(got) != want {
		t.Errorf("the kernel hands out %d ports, the fix claims %d: %q", len(got), want, fix)
	}
	if len(got) == 0 {
		t.Errorf("no port left: %q", fix)
	}
	for _, p := range got {
		if p >= avoidLo && p <= avoidHi {
			t.Errorf("port %d handed out, inside %d-%d: %q", p, avoidLo, avoidHi, fix)
			break
		}
		for _, s := range f.served {
			if p == s.port {
				t.Errorf("port %d, which the netns serves on (%s), handed to a connect(): %q", p, s.proto, fix)
			}
		}
	}
	serveAgain(t, f)
}

// applyAsPrinted applies fix's settings to f's netns as via says, and
// checks that the kernel took them.
func applyAsPrinted(t *testing.T, f *fixNetns, fix, via string) {
	t.Helper()
	set := map[string]string{}
	if via == viaPod {
		for _, m := range podSysctlRe.FindAllStringSubmatch(fix, -1) {
			set[m[1]] = m[2]
			if err := f.ns.SetSysctl(m[1], m[2]); err != nil {
				t.Fatalf("%s=%q: %v", m[1], m[2], err)
			}
		}
	} else {
		cmds := commandRe.FindAllStringSubmatch(fix, -1)
		if len(cmds) != 1 || (cmds[0][1] != "") != (via == viaEnter) {
			t.Fatalf("fix %q: commands %q, want one to run %s", fix, cmds, via)
		}
		runPrinted(t, f, cmds[0][0], via)
		for _, m := range assignRe.FindAllStringSubmatch(cmds[0][0], -1) {
			set[m[1]] = m[2] + m[3]
		}
	}
	if len(set) == 0 {
		t.Fatalf("fix %q sets nothing", fix)
	}
	for name, v := range set {
		got, err := f.ns.Sysctl(name)
		if err != nil || strings.Join(strings.Fields(got), " ") != v {
			t.Fatalf("%s reads back %q (%v), the fix set %q", name, got, err, v)
		}
	}
}

// runPrinted runs cmd with sh, from the node (a command that enters the
// netns) or inside the netns that plays the node.
func runPrinted(t *testing.T, f *fixNetns, cmd, via string) {
	t.Helper()
	sh := exec.Command("sh", "-c", cmd)
	var out strings.Builder
	sh.Stdout, sh.Stderr = &out, &out
	var err error
	if via == viaEnter {
		err = sh.Start()
	} else {
		err = f.ns.Start(sh)
	}
	if err == nil {
		err = sh.Wait()
	}
	if err != nil {
		t.Fatalf("%s: %v: %s", cmd, err, out.String())
	}
}

// kernelGives is every port connect() gets in f's netns: window by window
// of the range in effect (IP_LOCAL_PORT_RANGE narrows one socket's range,
// so each window fills on its own and no search walks the whole range),
// toward a destination that never answers. While a window is full, each
// TCP port the netns serves on inside it is bound again: a program
// restarting then must get its port. A UDP port it serves on is checked
// the same way against UDP sockets, whose ports are their own (udpWindow).
func kernelGives(t *testing.T, f *fixNetns) []int {
	t.Helper()
	dst := f.sink(t)
	r, err := f.ns.Sysctl("net.ipv4.ip_local_port_range")
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi int
	if _, err := fmt.Sscan(r, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if lo%2 != 0 || hi%2 != 1 {
		// The windows below would count every port; one connect() over
		// the whole range tries one less (portmodel's even-count cut).
		t.Errorf("range %d-%d: an odd count of ports, of which connect() tries one less than the fix counts", lo, hi)
	}
	var got []int
	const window = 512
	err = f.ns.Do(func() error {
		for w := lo; w <= hi; w += window {
			ports, err := fillWindow(unix.SOCK_STREAM, w, min(w+window-1, hi), dst, f.served)
			if err != nil {
				return err
			}
			got = append(got, ports...)
		}
		for _, s := range f.served {
			if s.proto == "udp" && s.port >= lo && s.port <= hi {
				if _, err := fillWindow(unix.SOCK_DGRAM, max(lo, s.port-2), min(hi, max(lo, s.port-2)+3), dst, f.served); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if errors.Is(err, unix.ENOPROTOOPT) {
		t.Skipf("IP_LOCAL_PORT_RANGE (Linux 6.3) is missing: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// fillWindow connects sockets of type typ whose range is [lo, hi] until
// connect() finds no port (TCP: EADDRNOTAVAIL, UDP: EAGAIN), binds each
// served port of that protocol inside [lo, hi] while they hold their ports,
// and closes them. It runs on a thread in the netns. A port handed out
// twice fails it: a socket lost its port meanwhile, and the count would be
// wrong.
func fillWindow(typ, lo, hi int, dst netip.AddrPort, srv []served) (ports []int, err error) {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	sa := &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	for {
		fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		fds = append(fds, fd)
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_LOCAL_PORT_RANGE, lo|hi<<16); err != nil {
			return nil, fmt.Errorf("IP_LOCAL_PORT_RANGE: %w", err)
		}
		err = unix.Connect(fd, sa)
		if errors.Is(err, unix.EADDRNOTAVAIL) || (typ == unix.SOCK_DGRAM && errors.Is(err, unix.EAGAIN)) {
			break
		}
		if err != nil && !errors.Is(err, unix.EINPROGRESS) {
			return nil, fmt.Errorf("connect in %d-%d: %w", lo, hi, err)
		}
		local, err := unix.Getsockname(fd)
		if err != nil {
			return nil, err
		}
		port := local.(*unix.SockaddrInet4).Port
		if slices.Contains(ports, port) {
			return nil, fmt.Errorf("port %d handed out twice in %d-%d: a socket lost it", port, lo, hi)
		}
		ports = append(ports, port)
	}
	for _, s := range srv {
		if s.port >= lo && s.port <= hi && (s.proto == "udp") == (typ == unix.SOCK_DGRAM) {
			if err := bindPort(s); err != nil {
				return nil, fmt.Errorf("%s port %d, with %d-%d full (%v): %w", s.proto, s.port, lo, hi, ports, err)
			}
		}
	}
	return ports, nil
}

// bindPort binds a socket of s's protocol to 0.0.0.0 and s's port, as its
// program does when it starts again (a TCP server with SO_REUSEADDR, as Go,
// nginx and most do, so that its own TIME_WAITs are no obstacle; no socket
// that connect() made has it), and closes it.
func bindPort(s served) error {
	typ := unix.SOCK_STREAM
	if s.proto == "udp" {
		typ = unix.SOCK_DGRAM
	}
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if typ == unix.SOCK_STREAM {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return err
		}
	}
	return unix.Bind(fd, &unix.SockaddrInet4{Port: s.port})
}

// serveAgain starts each served TCP port's program again, with the range as
// the fix left it, and makes it serve one exchange from inside the netns.
// The client closes first, so that no TIME_WAIT is left on the served port
// for the next fix applied here.
func serveAgain(t *testing.T, f *fixNetns) {
	t.Helper()
	for _, s := range f.served {
		if s.proto == "udp" {
			continue // bound again in kernelGives
		}
		l, err := f.ns.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", s.port))
		if err != nil {
			t.Errorf("listening on %d again: %v", s.port, err)
			continue
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if c, err := l.Accept(); err == nil {
				b := make([]byte, 1)
				if _, err := io.ReadFull(c, b); err == nil {
					c.Write([]byte("ok"))
					io.Copy(io.Discard, c) // until the client's FIN
				}
				c.Close()
			}
		}()
		if err := exchange(f, s.port); err != nil {
			t.Errorf("the listener on %d again: %v", s.port, err)
		}
		l.Close()
		<-done
	}
}

// exchange asks the listener on port for its answer, from inside the netns.
func exchange(f *fixNetns, port int) error {
	c, err := f.ns.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer c.Close()
	b := make([]byte, 2)
	if _, err := c.Write([]byte("?")); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ok" {
		return fmt.Errorf("read %q, %v", b, err)
	}
	return nil
}

// fixWith is the one fix of fs that has want in it.
func fixWith(t *testing.T, fs []string, want string) string {
	t.Helper()
	i := slices.IndexFunc(fs, func(f string) bool { return strings.Contains(f, want) })
	if i < 0 {
		t.Fatalf("no fix with %q: %q", want, fs)
	}
	return fs[i]
}
