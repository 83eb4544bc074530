package explain

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	rec "github.com/eaddr/eaddr/internal/testing/recorded"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

func TestCatalogValid(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	v := msgVars{Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL, IP: netip.MustParseAddr("10.0.0.1"), Port: 80, Prog: []byte("x"), PID: 1, FD: 3, Family: decode.AFInet, Addrlen: 16}
	for _, cl := range c.Clients {
		if cl.ID == "" || ids[cl.ID] {
			t.Errorf("client id %q empty or repeated", cl.ID)
		}
		ids[cl.ID] = true
		if cl.Name == "" || cl.Source == "" || cl.Order == "" || len(cl.Messages) == 0 || len(cl.Libcs) == 0 {
			t.Errorf("%s: name, source, order, messages and libcs are all required", cl.ID)
		}
		if len(cl.Match.Exe)+len(cl.Match.Applet)+len(cl.Match.Runtime)+len(cl.Match.Needed)+len(cl.Match.Argv0) == 0 {
			t.Errorf("%s: no way to recognise it", cl.ID)
		}
		for _, l := range cl.Libcs {
			if l != libcGlibc && l != libcMusl && l != libcGo {
				t.Errorf("%s: libc %q", cl.ID, l)
			}
		}
		for _, m := range cl.Messages {
			if m.Syscall != "*" && syscallByName(m.Syscall) == 0 {
				t.Errorf("%s: syscall %q", cl.ID, m.Syscall)
			}
			if _, err := decode.ParseErrno(m.Errno); m.Errno != "*" && err != nil {
				t.Errorf("%s: %v", cl.ID, err)
			}
			for _, text := range append([]string{m.Text}, m.Also...) {
				v.Libc, v.Applet = cl.Libcs[0], []byte("telnet")
				out, ok := render(nil, text, &v)
				if !ok || (strings.ContainsAny(string(out), "{}") && !strings.Contains(text, "{lbrace}")) {
					t.Errorf("%s: template %q renders as %q (ok %v)", cl.ID, text, out, ok)
				}
			}
		}
	}
	for _, e := range c.Errnos {
		if e.Meaning == "" || (e.Syscall != "*" && syscallByName(e.Syscall) == 0) {
			t.Errorf("errno entry %+v incomplete", e)
		}
	}
	// The minimum coverage.
	for _, id := range []string{"curl", "gnu-wget", "busybox-wget", "busybox-nc", "openbsd-nc", "ncat", "socat", "python", "go", "java", "node", "perl", "ruby", "nginx", "envoy"} {
		if !ids[id] {
			t.Errorf("catalog lacks %s", id)
		}
	}
}

// Every wording people paste is recognised as the right errno, syscall,
// client and libc; the three lines at the top of the issue verbatim.
func TestIdentify(t *testing.T) {
	c, _ := loadCatalog()
	for _, tc := range []struct {
		in     string
		errno  int
		sys    decode.Syscall
		client string // "" for a bare strerror
		libc   Libc
		ip     string
		port   uint16
	}{
		{"can't connect to remote host (1.1.1.1): Address not available", decode.EADDRNOTAVAIL, decode.Connect, "busybox wget", libcMusl, "1.1.1.1", 0},
		{"wget: can't connect to remote host (1.1.1.1): Address not available", decode.EADDRNOTAVAIL, decode.Connect, "busybox wget", libcMusl, "1.1.1.1", 0},
		{"(7) Couldn't connect to server", 0, decode.Connect, "curl", "", "", 0},
		{"curl: (7) Failed to connect to 10.96.0.10 port 80 after 0 ms: Couldn't connect to server", 0, decode.Connect, "curl", "", "10.96.0.10", 80},
		{"curl: (7) Failed to connect to 10.96.0.10 port 80: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "curl", libcGlibc, "10.96.0.10", 80},
		// curl 8.9.0 and later (lib/strerror.c), 8.21.0's HOST:PORT (lib/cf-ip-happy.c)
		{"curl: (7) Failed to connect to 10.96.0.10 port 80 after 0 ms: Could not connect to server", 0, decode.Connect, "curl", "", "10.96.0.10", 80},
		{"curl: (7) Failed to connect to 10.96.0.10:80 after 0 ms: Could not connect to server", 0, decode.Connect, "curl", "", "10.96.0.10", 80},
		{"curl: (7) Failed to connect to [2001:db8::1]:443 after 0 ms: Could not connect to server", 0, decode.Connect, "curl", "", "2001:db8::1", 443},
		{"curl: (28) Failed to connect to 10.96.0.10 port 80 after 3001 ms: Could not connect to server", 110, decode.Connect, "curl", "", "10.96.0.10", 80},
		{"curl: (7) Could not connect to server", 0, decode.Connect, "curl", "", "", 0},
		{"fatal: unable to access 'http://10.96.0.10/': Failed to connect to 10.96.0.10 port 80 after 1 ms: Could not connect to server", 0, decode.Connect, "a libcurl program", "", "10.96.0.10", 80},
		{"bind: Address in use", decode.EADDRINUSE, decode.Bind, "busybox nc", libcMusl, "", 0},
		{"nc: bind: Address in use", decode.EADDRINUSE, decode.Bind, "busybox nc", libcMusl, "", 0},
		{"Cannot assign requested address", decode.EADDRNOTAVAIL, 0, "", libcGlibc, "", 0},
		{"Address not available", decode.EADDRNOTAVAIL, 0, "", libcMusl, "", 0},
		{"cannot assign requested address", decode.EADDRNOTAVAIL, 0, "", libcGo, "", 0},
		{"Address already in use", decode.EADDRINUSE, 0, "", libcGlibc, "", 0},
		{"99", decode.EADDRNOTAVAIL, 0, "", "", "", 0},
		{"EADDRNOTAVAIL", decode.EADDRNOTAVAIL, 0, "", "", "", 0},
		{"eaddrinuse", decode.EADDRINUSE, 0, "", "", "", 0},
		{"Connecting to 10.96.0.10:80... failed: Cannot assign requested address.", decode.EADDRNOTAVAIL, decode.Connect, "GNU wget", libcGlibc, "10.96.0.10", 80},
		{"nc: connect to 10.96.0.10 port 80 (tcp) failed: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "OpenBSD nc", libcGlibc, "10.96.0.10", 80},
		{"Ncat: Cannot assign requested address.", decode.EADDRNOTAVAIL, decode.Connect, "Ncat (nmap)", libcGlibc, "", 0},
		{"2026/11/30 05:00:00 socat[42] E connect(5, AF=2 10.96.0.10:80, 16): Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "socat", libcGlibc, "10.96.0.10", 80},
		{"OSError: [Errno 99] Cannot assign requested address", decode.EADDRNOTAVAIL, 0, "Python", libcGlibc, "", 0},
		{"OSError: [Errno 99] Address not available", decode.EADDRNOTAVAIL, 0, "Python", libcMusl, "", 0},
		{"ConnectionRefusedError: [Errno 111] Connection refused", 111, decode.Connect, "Python", libcGlibc, "", 0},
		{"dial tcp 10.96.0.10:80: connect: cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "Go programs", libcGo, "10.96.0.10", 80},
		{"listen tcp 0.0.0.0:8080: bind: address already in use", decode.EADDRINUSE, decode.Bind, "Go programs", libcGo, "0.0.0.0", 8080},
		{"java.net.BindException: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "Java", libcGlibc, "", 0},
		// JDK 8's java.net.Socket (PlainSocketImpl.c socketConnect)
		{"java.net.NoRouteToHostException: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "Java", libcGlibc, "", 0},
		{"java.net.ConnectException: Connection timed out", 110, decode.Connect, "Java", libcGlibc, "", 0},
		{"Error: connect EADDRNOTAVAIL 10.0.0.1:80 - Local (0.0.0.0:0)", decode.EADDRNOTAVAIL, decode.Connect, "Node.js", "", "10.0.0.1", 80},
		{"IO::Socket::INET: connect: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "Perl", libcGlibc, "", 0},
		{`Cannot assign requested address - connect(2) for "10.96.0.10" port 80 (Errno::EADDRNOTAVAIL)`, decode.EADDRNOTAVAIL, decode.Connect, "Ruby", libcGlibc, "10.96.0.10", 80},
		{"2026/11/30 05:00:00 [crit] 7#7: *1 connect() to 10.96.0.10:80 failed (99: Cannot assign requested address) while connecting to upstream", decode.EADDRNOTAVAIL, decode.Connect, "nginx upstream", libcGlibc, "10.96.0.10", 80},
		{"upstream connect error or disconnect/reset before headers. reset reason: connection failure, transport failure reason: immediate connect error: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "Envoy upstream", libcGlibc, "", 0},
		{"ssh: connect to host 10.96.0.10 port 22: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "OpenSSH ssh", libcGlibc, "10.96.0.10", 22},
		{"Could not connect to Redis at 10.96.0.10:6379: Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "redis-cli", libcGlibc, "10.96.0.10", 6379},
		{`psql: error: connection to server at "10.96.0.10", port 5432 failed: Cannot assign requested address`, decode.EADDRNOTAVAIL, decode.Connect, "psql (libpq)", libcGlibc, "10.96.0.10", 5432},
		{"Can't grab 0.0.0.0:8080 with bind", decode.EADDRINUSE, decode.Bind, "netcat-traditional", "", "0.0.0.0", 8080},
		{"(UNKNOWN) [10.96.0.10] 80 (http) : Cannot assign requested address", decode.EADDRNOTAVAIL, decode.Connect, "netcat-traditional", libcGlibc, "10.96.0.10", 80},
		{"[Tue Dec  1 16:18:03 2026] Failed to listen on 127.0.0.1:8080 (reason: Address already in use)", decode.EADDRINUSE, decode.Bind, "PHP built-in web server", libcGlibc, "127.0.0.1", 8080},
		{"PHP Warning:  fsockopen(): Unable to connect to 10.96.0.10:80 (Cannot assign requested address) in x.php on line 3", decode.EADDRNOTAVAIL, decode.Connect, "PHP", libcGlibc, "10.96.0.10", 80},
		{"500 Can't connect to 10.96.0.10:80 (Cannot assign requested address)", decode.EADDRNOTAVAIL, decode.Connect, "Perl LWP", libcGlibc, "10.96.0.10", 80},
		{"curl: (45) bind failed with errno 98: Address already in use", decode.EADDRINUSE, decode.Bind, "curl", libcGlibc, "", 0},
		{"listen tcp :8080: bind: address already in use", decode.EADDRINUSE, decode.Bind, "Go programs", libcGo, "", 8080},
		{"2026/12/01 16:18:02 socat[19963] E bind(5, {AF=2 127.0.0.1:8080}, 16): Address already in use", decode.EADDRINUSE, decode.Bind, "socat", libcGlibc, "127.0.0.1", 8080},
		// No client claims a bare perror() line: only the errno text is known.
		{"connect: Address not available", decode.EADDRNOTAVAIL, 0, "", libcMusl, "", 0},
	} {
		ids := c.Identify(tc.in)
		if len(ids) == 0 {
			t.Errorf("%q not recognised", tc.in)
			continue
		}
		id := ids[0]
		name := ""
		if id.Client != nil {
			name = id.Client.Name
		}
		ip := ""
		if id.IP.IsValid() {
			ip = id.IP.String()
		}
		if id.Errno != tc.errno || id.Syscall != tc.sys || name != tc.client || id.Libc != tc.libc || ip != tc.ip || id.Port != tc.port {
			t.Errorf("%q:\n got errno %d %v client %q libc %q %s:%d\nwant errno %d %v client %q libc %q %s:%d",
				tc.in, id.Errno, id.Syscall, name, id.Libc, ip, id.Port, tc.errno, tc.sys, tc.client, tc.libc, tc.ip, tc.port)
		}
	}
	for _, in := range []string{"hello world", "", "   ", "the quick brown fox"} {
		if ids := c.Identify(in); len(ids) != 0 {
			t.Errorf("%q recognised as %+v", in, ids[0])
		}
	}
	if got := c.Closest("can't connect to the remote", 3); len(got) == 0 {
		t.Error("no closest wordings for a near miss")
	}
}

// recorded decodes a recorded event and tells the Detector what its binary
// was (the recording machine's inodes are not this machine's).
func recorded(t *testing.T, x *Explainer, name string, info BinaryInfo) *decode.Event {
	t.Helper()
	var ev decode.Event
	decode.NewDecoder(nil).Decode(rec.Raw(t, name), &ev)
	x.Detector.remember(&ev, info)
	return &ev
}

// What each recorded client printed (testdata/events/README.md) is what
// eaddr predicts from its event.
func TestClientMessageFromRecordedEvents(t *testing.T) {
	x, err := NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	c := BinaryInfo{Runtime: "c", Libc: libcGlibc}
	for _, tc := range []struct {
		file string
		bin  BinaryInfo
		want string
	}{
		{"connect-eaddrnotavail-curl-ipv4", c, "curl: (7) Failed to connect to <host> port 8080 after <ms> ms: Couldn't connect to server"},
		{"connect-eaddrnotavail-wget-ipv6", c, "Connecting to <host>... failed: Cannot assign requested address."},
		{"connect-eaddrnotavail-busybox-wget-ipv4", BinaryInfo{Runtime: "busybox", Libc: libcGlibc}, "wget: can't connect to remote host (127.0.0.1): Cannot assign requested address"},
		{"connect-eaddrnotavail-busybox-nc-ipv4", BinaryInfo{Runtime: "busybox", Libc: libcGlibc}, "nc: can't connect to remote host (127.0.0.1): Cannot assign requested address"},
		{"connect-eaddrnotavail-openbsd-nc-ipv4", c, "nc.openbsd: connect to 127.0.0.1 port 8080 (tcp) failed: Cannot assign requested address"},
		{"connect-eaddrnotavail-python3-ipv4", BinaryInfo{Runtime: "python", Libc: libcGlibc}, "OSError: [Errno 99] Cannot assign requested address"},
		{"bind-eaddrinuse-python3-ipv4", BinaryInfo{Runtime: "python", Libc: libcGlibc}, "OSError: [Errno 98] <rest>"},
		{"connect-econnrefused-python3-ipv4", BinaryInfo{Runtime: "python", Libc: libcGlibc}, "ConnectionRefusedError: [Errno 111] Connection refused"},
		// The same busybox event, had the image been Alpine's (musl).
		{"connect-eaddrnotavail-busybox-wget-ipv4", BinaryInfo{Runtime: "busybox", Libc: libcMusl}, "wget: can't connect to remote host (127.0.0.1): Address not available"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ev := recorded(t, x, tc.file, tc.bin)
			var ex Explanation
			x.Explain(ev, &ex, true)
			got, ok := ex.ClientMessage, ex.HasClientMessage
			if !ok || string(got) != tc.want {
				t.Errorf("predicted %q (ok %v), want %q", got, ok, tc.want)
			}
			if ex.Meaning == nil || len(ex.OtherWordings) < 10 {
				t.Errorf("no meaning, or fewer than 10 other wordings: %+v", ex)
			}
		})
	}
}

// A native program eaddr has no wording for is not given one: no client,
// no line, and the errno texts to grep for, its libc's or both when the
// libc is unknown.
func TestUnknownProgramClaimsNothing(t *testing.T) {
	x, err := NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bin  BinaryInfo
		grep []string
	}{
		{BinaryInfo{Runtime: runtimeC, Libc: libcGlibc}, []string{"Cannot assign requested address"}},
		{BinaryInfo{Runtime: runtimeC, Libc: libcMusl}, []string{"Address not available"}},
		{BinaryInfo{Runtime: runtimeC}, []string{"Cannot assign requested address", "Address not available"}},
	} {
		ev := recorded(t, x, "connect-eaddrnotavail-curl-ipv4", tc.bin)
		ev.ExeName, ev.Comm, ev.Args = []byte("myapp"), []byte("myapp"), []byte("myapp\x00")
		var ex Explanation
		x.Explain(ev, &ex, false)
		if ex.Client != nil {
			t.Errorf("%+v: client %q claimed", tc.bin, ex.Client.Name)
		}
		if msg, ok := ex.ClientMessage, ex.HasClientMessage; ok || ex.Confidence != "" {
			t.Errorf("%+v: predicted %q (%s)", tc.bin, msg, ex.Confidence)
		}
		if got := ex.Grep; strings.Join(got, "|") != strings.Join(tc.grep, "|") {
			t.Errorf("%+v: grep %q, want %q", tc.bin, got, tc.grep)
		}
		if ex.ClientUnknown == "" {
			t.Errorf("no reason why the client is unknown")
		}
	}
}

func TestExplainDoesNotAllocate(t *testing.T) {
	x, _ := NewExplainer()
	ev := recorded(t, x, "connect-eaddrnotavail-busybox-wget-ipv4", BinaryInfo{Runtime: "busybox", Libc: libcGlibc})
	var ex Explanation
	buf := make([]byte, 0, 16384)
	for _, full := range []bool{false, true} {
		n := testing.AllocsPerRun(200, func() {
			x.Explain(ev, &ex, full)
			buf = append(buf[:0], ex.ClientMessage...)
		})
		if n != 0 {
			t.Errorf("explain (wordings %v) allocates %.1f times per event, want 0", full, n)
		}
	}
}

// A client that exits right after its failure is still classified: the
// Detector finds its binary from the kernel's exe identity and argv after
// the process is gone, and caches it for the next event.
func TestDetectorAfterExit(t *testing.T) {
	for _, tc := range []struct {
		path    string
		runtime string
		pkg     string
	}{{"/usr/bin/python3", "python", "python3"}, {"/usr/bin/curl", "c", "curl"}} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) { testDetectorAfterExit(t, tc.path, tc.runtime, tc.pkg) })
	}
}

func testDetectorAfterExit(t *testing.T, path, runtime, pkg string) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		testenv.Missing(t, path, pkg)
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--version")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// The process has exited and been reaped: /proc/PID/exe is gone.
	pid := cmd.Process.Pid
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "exe")); err == nil {
		t.Fatalf("pid %d still exists", pid)
	}
	ev := &decode.Event{PID: uint32(pid), PPID: uint32(os.Getpid()), MntNS: selfMntNS(t), ExeName: []byte(filepath.Base(real)),
		ExeIno: st.Ino, ExeDev: st.Dev, Args: []byte(path + "\x00--version")}
	d := newDetector()
	info, source, ok := d.binaryOf(ev)
	if !ok || info.Runtime != runtime || info.Libc != libcGlibc || source != "path" {
		t.Errorf("%s after exit: %+v from %q (ok %v), want runtime %s glibc from path", path, info, source, ok, runtime)
	}
	if _, source, ok := d.binaryOf(ev); !ok || source != "cache" || d.Lookups != 1 {
		t.Errorf("second event: source %q ok %v lookups %d, want the cache and 1 lookup", source, ok, d.Lookups)
	}
	if runtime != "python" {
		return
	}
	// A live process is read through /proc/PID/exe.
	live := exec.Command(path, "-c", "import time; time.sleep(30)")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	ev.PID = uint32(live.Process.Pid)
	d2 := newDetector()
	if info, source, ok := d2.binaryOf(ev); !ok || source != "exe" || info.Runtime != "python" {
		t.Errorf("live process: %+v from %q (ok %v)", info, source, ok)
	}
}

// An unknown binary (gone and not findable) is not retried within NegativeTTL.
func TestDetectorNegativeCache(t *testing.T) {
	d := newDetector()
	ev := &decode.Event{PID: 1 << 30, PPID: 1 << 30, ExeName: []byte("no-such-binary"), ExeIno: 12345, ExeDev: 1}
	for range 3 {
		if _, _, ok := d.binaryOf(ev); ok {
			t.Fatal("found a binary that does not exist")
		}
	}
	if d.Lookups != 1 {
		t.Errorf("lookups %d, want 1", d.Lookups)
	}
}

// A native program is recognised by what it links: git's http helper
// words a failed connect as libcurl does; curl itself stays curl; a Go
// program never matches a library rule.
func TestClassifyByLinkedLibrary(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bin  BinaryInfo
		exe  string
		want string
	}{
		{BinaryInfo{Runtime: runtimeC, Libc: libcGlibc, Needed: []string{"libcurl-gnutls.so.4", "libz.so.1"}}, "git-remote-http", "libcurl"},
		{BinaryInfo{Runtime: runtimeC, Libc: libcGlibc, Needed: []string{"libcurl.so.4"}}, "curl", "curl"},
		{BinaryInfo{Runtime: runtimeC, Libc: libcGlibc, Needed: []string{"libz.so.1"}}, "myapp", ""},
		{BinaryInfo{Runtime: runtimeGo, Libc: libcGo, Needed: []string{"libcurl.so.4"}}, "app", "go"},
	} {
		got := ""
		if cl := c.clientOf(&tc.bin, &seenAs{Exe: []byte(tc.exe)}, decode.EADDRNOTAVAIL); cl != nil {
			got = cl.ID
		}
		if got != tc.want {
			t.Errorf("%s %v: client %q, want %q", tc.exe, tc.bin.Needed, got, tc.want)
		}
	}
}

// Matching an interpreter's program (php -S, perl -MLWP...) is on the
// per-event path: it must not allocate.
func TestClassifyProgramDoesNotAllocate(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	bin := BinaryInfo{Runtime: runtimePerl, Libc: libcGlibc}
	seen := seenAs{Exe: []byte("perl"), Program: []byte("-MLWP::UserAgent -e")}
	if cl := c.clientOf(&bin, &seen, 111); cl == nil || cl.ID != "perl-lwp" {
		t.Fatalf("classified as %v, want perl-lwp", cl)
	}
	if n := testing.AllocsPerRun(100, func() { c.clientOf(&bin, &seen, 111) }); n != 0 {
		t.Errorf("clientOf allocates %.0f times", n)
	}
}
