package kernel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// The scenarios of TestWordingsRealPrograms, each a network namespace of its
// own (docs in /work/notes/wordings-capture.md, where the outputs were
// first recorded by hand):
const (
	// scA: connect() to 127.0.0.1:8080 fails with EADDRNOTAVAIL: the two
	// ports of ip_local_port_range are both held toward it.
	scA = "A"
	// scA6: the same toward [::1]:8080.
	scA6 = "A6"
	// scB: bind() fails with EADDRINUSE: a listener holds 127.0.0.1:8080.
	scB = "B"
	// scC: connect() to 127.0.0.1:8080 is refused (ECONNREFUSED): nothing
	// listens there. A blocking connect() reports the refusal as its own
	// result; a non-blocking one returns EINPROGRESS and learns of it later,
	// reported as "async": true.
	scC = "C"
	// scT: connect() to 10.9.0.2:80 times out (ETIMEDOUT, about 3 s): the
	// SYN is dropped (blackholeNS, tcp_syn_retries=1).
	scT = "T"
)

// wordingRow is one real program in one scenario.
type wordingRow struct {
	program  string // label in the log and the report
	scenario string
	// bin is looked up on PATH (look), except "python3" (demo.Python3()) and
	// "godial" (built from testdata/clients/godial).
	bin  string
	args []string
	// syscall and errno pick the events the row is about; the program's
	// other failures (glibc's nscd probe, urllib3's IPv6 probe) are judged
	// too, as side events.
	syscall, errno string
	// key is a fixed part of the line the program prints for the failure
	// (the report shows the first printed line holding it).
	key string
	// catalogued: explain/catalog.json words this program (or is meant
	// to): its prediction must be exact or contained, not just not wrong.
	catalogued bool
	// tries: how many failing calls the program makes for its one printed
	// line (0: not checked); they must be numbered 1 to tries, and the
	// explanation must say why (explain.retries).
	tries int
}

// wordingRows: one row per program and scenario of the capture that makes
// a connect()/bind() event. Rows that make none (a non-blocking connect()
// refused: curl, psql, PHP, node, Go, asyncio, Python with a timeout, LWP,
// Ruby's TCPSocket, OpenBSD nc) are not here; the capture lists them.
func wordingRows() []wordingRow {
	const (
		url  = "http://127.0.0.1:8080/"
		url6 = "http://[::1]:8080/"
	)
	c := func(program, scenario, key string, catalogued bool, bin string, args ...string) wordingRow {
		sys, errno := "connect", map[string]string{scA: "EADDRNOTAVAIL", scA6: "EADDRNOTAVAIL", scC: "ECONNREFUSED", scT: "ETIMEDOUT"}[scenario]
		if scenario == scB {
			sys, errno = "bind", "EADDRINUSE"
		}
		return wordingRow{program: program, scenario: scenario, bin: bin, args: args,
			syscall: sys, errno: errno, key: key, catalogued: catalogued}
	}
	// bind: a client that binds before it connects; errno is the bind's.
	bind := func(r wordingRow, errno string) wordingRow {
		r.syscall, r.errno = "bind", errno
		return r
	}
	php := func(call string) string {
		return `$f=` + call + `; if(!$f) echo "$errstr ($errno)\n";`
	}
	var rows []wordingRow
	// Clients that fail in connect(): exhausted (A) and refused (C).
	for _, sc := range []string{scA, scC} {
		rows = append(rows,
			c("ssh", sc, "ssh: connect to host", true, "ssh", "-o", "BatchMode=yes", "-p", "8080", "127.0.0.1"),
			c("redis-cli", sc, "Could not connect to Redis", true, "redis-cli", "-h", "127.0.0.1", "-p", "8080", "ping"),
			c("ruby Net::HTTP.get", sc, "Failed to open TCP connection", true, "ruby", "-rnet/http", "-e", `Net::HTTP.get(URI("`+url+`"))`),
			c("nc.traditional", sc, "(UNKNOWN) [127.0.0.1] 8080", true, "nc.traditional", "127.0.0.1", "8080"),
			c("nc.traditional -v", sc, "[127.0.0.1] 8080", true, "nc.traditional", "-v", "-w", "3", "127.0.0.1", "8080"),
			// What a Perl script prints depends on its modules: eaddr claims
			// no line for a bare perl (catalogued false: unknown is right).
			c("perl IO::Socket::INET", sc, "cannot connect:", false, "perl", "-MIO::Socket::INET", "-e",
				`IO::Socket::INET->new(PeerAddr=>"127.0.0.1:8080") or die "cannot connect: $@\n"`),
			c("python socket.create_connection (blocking)", sc, "Error: [Errno", true, "python3", "-c",
				"import socket; socket.create_connection(('127.0.0.1', 8080))"),
			c("python urllib.request.urlopen", sc, "urllib.error.URLError:", true, "python3", "-c",
				`import urllib.request; urllib.request.urlopen("`+url+`")`),
			c("python requests.get", sc, "requests.exceptions.ConnectionError:", true, "python3", "-c",
				`import requests; requests.get("`+url+`")`),
			c("socat TCP4", sc, " E connect(", true, "socat", "-", "TCP:127.0.0.1:8080"),
			c("GNU wget", sc, "Connecting to 127.0.0.1:8080... failed:", true, "wget", "-t1", "-T5", "-O", "/dev/null", url),
			c("busybox wget", sc, "wget: can't connect to remote host", true, "busybox", "wget", "-O", "/dev/null", url),
			c("busybox nc", sc, "nc: can't connect to remote host", true, "busybox", "nc", "127.0.0.1", "8080"),
			c("busybox telnet", sc, "telnet: can't connect to remote host", true, "busybox", "telnet", "127.0.0.1", "8080"),
		)
	}
	// Only exhaustion is synchronous for these: they connect non-blocking.
	rows = append(rows,
		c("psql", scA, "psql: error: connection to server", true, "psql", "-h", "127.0.0.1", "-p", "8080", "-U", "x", "-c", "select 1"),
		// One php process can connect through streams or the curl
		// extension, which word it differently: eaddr claims no line.
		c("php fsockopen", scA, "fsockopen(): Unable to connect", false, "php", "-r", php(`fsockopen("127.0.0.1",8080,$errno,$errstr,5)`)),
		c("php stream_socket_client", scA, "stream_socket_client(): Unable to connect", false, "php", "-r",
			php(`stream_socket_client("tcp://127.0.0.1:8080",$errno,$errstr,5)`)),
		c("php curl_exec", scA, "curl error:", false, "php", "-r",
			`$c=curl_init("`+url+`"); if(curl_exec($c)===false) echo "curl error: ".curl_error($c)."\n";`),
		c("ruby TCPSocket.new", scA, "connect(2) for", true, "ruby", "-rsocket", "-e", `TCPSocket.new("127.0.0.1", 8080)`),
		c("perl LWP::UserAgent", scA, "500 Can't connect", true, "perl", "-MLWP::UserAgent", "-e",
			`print LWP::UserAgent->new->get("`+url+`")->status_line, "\n"`),
		c("python socket.create_connection (timeout)", scA, "OSError: [Errno", true, "python3", "-c",
			"import socket; socket.create_connection(('127.0.0.1', 8080), timeout=5)"),
		c("python asyncio.open_connection", scA, "OSError: [Errno", true, "python3", "-c",
			`import asyncio; asyncio.run(asyncio.open_connection("127.0.0.1", 8080))`),
		c("node net.connect (error event)", scA, "connect EADDRNOTAVAIL", true, "node", "-e",
			`require("net").connect(8080,"127.0.0.1").on("error",e=>console.log(e.message))`),
		c("node net.connect (uncaught)", scA, "Error: connect EADDRNOTAVAIL", true, "node", "-e", `require("net").connect(8080,"127.0.0.1")`),
		c("node fetch (caught: message, cause.message)", scA, "connect EADDRNOTAVAIL", true, "node", "-e",
			`fetch("`+url+`").catch(e=>{console.log(e.message); console.log(e.cause.message)})`),
		c("node fetch (uncaught)", scA, "[cause]: Error: connect", true, "node", "--input-type=module", "-e", `await fetch("`+url+`")`),
		// apt-get's http method (a helper child) fails; apt-get prints.
		c("apt-get update (its http method)", scA, "Cannot initiate the connection", true, "apt-get", "update"),
		// A program that links libcurl (git's http helper) words it as libcurl.
		c("git ls-remote (libcurl)", scA, "unable to access", true, "git", "ls-remote", url),
		// libwww-perl's own script (perl runs it: recognised by argv).
		c("lwp-request", scA, "Can't connect to", true, "lwp-request", url),
		c("go net.Dial", scA, "dial tcp", true, "godial", "dial", "tcp", "127.0.0.1:8080"),
		c("go log.Fatal(net.Dial)", scA, "dial tcp", true, "godial", "fatal-dial", "tcp", "127.0.0.1:8080"),
		c("go http.Get", scA, "Get \"", true, "godial", "get", url),
		c("curl", scA, "curl: (7)", true, "curl", "-sS", url),
		c("OpenBSD nc -v", scA, "connect to 127.0.0.1 port 8080", true, "nc.openbsd", "-v", "-w", "3", "127.0.0.1", "8080"),
		// Without -v OpenBSD nc prints nothing: any message is a wrong claim.
		c("OpenBSD nc (no -v: silent)", scA, "", false, "nc.openbsd", "127.0.0.1", "8080"),
		c("socat TCP6", scC, " E connect(", true, "socat", "-", "TCP6:[::1]:8080"),
	)
	// Non-blocking clients: refused (C) and timed out (T) after connect()
	// returned EINPROGRESS ("async": true); busybox wget connects blocking.
	const dropped = "http://10.9.0.2/"
	rows = append(rows,
		c("curl (async)", scC, "curl: (7)", true, "curl", "-sS", url),
		c("go net.Dial (async)", scC, "dial tcp", true, "godial", "dial", "tcp", "127.0.0.1:8080"),
		c("node net.connect (async)", scC, "connect ECONNREFUSED", true, "node", "-e",
			`require("net").connect(8080,"127.0.0.1").on("error",e=>console.log(e.message))`),
		c("python socket.create_connection (timeout, async)", scC, "ConnectionRefusedError", true, "python3", "-c",
			"import socket; socket.create_connection(('127.0.0.1', 8080), timeout=10)"),
		c("curl", scT, "curl: (28)", true, "curl", "-sS", "--connect-timeout", "20", dropped),
		c("go net.Dial (timeout)", scT, "dial tcp", true, "godial", "dial", "tcp", "10.9.0.2:80"),
		c("node net.connect", scT, "connect ETIMEDOUT", true, "node", "-e",
			`require("net").connect(80,"10.9.0.2").on("error",e=>console.log(e.message))`),
		c("node fetch", scT, "connect ETIMEDOUT", true, "node", "-e",
			`fetch("`+dropped+`").catch(e=>{console.log(e.message); console.log(e.cause.message)})`),
		c("python socket.create_connection", scT, "TimeoutError", true, "python3", "-c",
			"import socket; socket.create_connection(('10.9.0.2', 80), timeout=10)"),
		c("python urllib.request.urlopen", scT, "urllib.error.URLError", true, "python3", "-c",
			`import urllib.request; urllib.request.urlopen("`+dropped+`", timeout=10)`),
		c("GNU wget", scT, "failed: Connection timed out", true, "wget", "-t1", "-T10", "-O", "/dev/null", dropped),
		c("busybox wget", scT, "can't connect to remote host", true, "busybox", "wget", "-O", "/dev/null", dropped),
	)
	// IPv6.
	rows = append(rows,
		c("node net.connect IPv6 (error event)", scA6, "connect EADDRNOTAVAIL ::1:8080", true, "node", "-e",
			`require("net").connect(8080,"::1").on("error",e=>console.log(e.message))`),
		c("node net.connect IPv6 (uncaught)", scA6, "Error: connect EADDRNOTAVAIL", true, "node", "-e", `require("net").connect(8080,"::1")`),
		c("node fetch IPv6 (uncaught)", scA6, "[cause]: Error: connect", true, "node", "--input-type=module", "-e", `await fetch("`+url6+`")`),
		c("socat TCP6", scA6, " E connect(", true, "socat", "-", "TCP6:[::1]:8080"),
		c("curl IPv6", scA6, "curl: (7)", true, "curl", "-sS", url6),
		c("python socket.create_connection IPv6", scA6, "OSError: [Errno", true, "python3", "-c",
			"import socket; socket.create_connection(('::1', 8080))"),
		c("go net.Dial IPv6", scA6, "dial tcp", true, "godial", "dial", "tcp", "[::1]:8080"),
		c("ssh IPv6", scA6, "ssh: connect to host", true, "ssh", "-o", "BatchMode=yes", "-p", "8080", "::1"),
		c("busybox wget IPv6", scA6, "wget: can't connect to remote host", true, "busybox", "wget", "-O", "/dev/null", url6),
	)
	// Servers and clients that bind a port a listener holds.
	rows = append(rows,
		c("ruby TCPServer.new(8080)", scB, "bind(2) for", true, "ruby", "-rsocket", "-e", `TCPServer.new(8080)`),
		c("ruby TCPServer.new(\"127.0.0.1\", 8080)", scB, "bind(2) for", true, "ruby", "-rsocket", "-e", `TCPServer.new("127.0.0.1", 8080)`),
		c("nc.traditional -p 8080", scB, "Can't grab", true, "nc.traditional", "-p", "8080", "127.0.0.1", "8080"),
		c("nc.traditional -v -p 8080", scB, "Can't grab", true, "nc.traditional", "-v", "-p", "8080", "127.0.0.1", "8080"),
		c("nc.traditional -l -p 8080", scB, "Can't grab", true, "nc.traditional", "-l", "-p", "8080"),
		c("OpenBSD nc -p 8080", scB, "bind failed", true, "nc.openbsd", "-p", "8080", "127.0.0.1", "8080"),
		c("OpenBSD nc -l", scB, "Address already in use", true, "nc.openbsd", "-l", "127.0.0.1", "8080"),
		// (busybox 1.35's nc ignores -p when it connects: no bind, no event.)
		c("busybox nc -l -p 8080", scB, "nc: bind:", true, "busybox", "nc", "-l", "-p", "8080"),
		c("busybox httpd", scB, "httpd: bind:", true, "busybox", "httpd", "-f", "-p", "127.0.0.1:8080"),
		c("node http listen(8080)", scB, "Error: listen EADDRINUSE", true, "node", "-e", `require("http").createServer().listen(8080)`),
		c("node http listen(8080, \"127.0.0.1\")", scB, "Error: listen EADDRINUSE", true, "node", "-e",
			`require("http").createServer().listen(8080, "127.0.0.1")`),
		c("node net server (error event)", scB, "listen EADDRINUSE", true, "node", "-e",
			`require("net").createServer().listen(8080, "127.0.0.1").on("error",e=>console.log(e.message))`),
		c("go net.Listen \":8080\"", scB, "listen tcp", true, "godial", "listen", "tcp", ":8080"),
		c("go net.Listen \"127.0.0.1:8080\"", scB, "listen tcp", true, "godial", "listen", "tcp", "127.0.0.1:8080"),
		c("go http.ListenAndServe \":8080\"", scB, "listen tcp", true, "godial", "http-listen", ":8080"),
		c("python socket.create_server", scB, "OSError: [Errno", true, "python3", "-c", `import socket; socket.create_server(("127.0.0.1", 8080))`),
		c("python -m http.server", scB, "OSError: [Errno", true, "python3", "-m", "http.server", "8080", "--bind", "127.0.0.1"),
		c("python asyncio.start_server", scB, "OSError: [Errno", true, "python3", "-c",
			"import asyncio\nasync def main(): await asyncio.start_server(lambda r, w: None, \"127.0.0.1\", 8080)\nasyncio.run(main())"),
		c("socat bind=", scB, " E bind(", true, "socat", "-", "TCP:127.0.0.1:8080,bind=127.0.0.1:8080"),
		c("socat TCP-LISTEN", scB, " E bind(", true, "socat", "TCP-LISTEN:8080,bind=127.0.0.1", "-"),
		c("curl --local-port 8080", scB, "curl: (45)", true, "curl", "-sS", "--local-port", "8080", url),
		c("php stream_socket_server", scB, "stream_socket_server(): Unable to connect", true, "php", "-r",
			`$s=stream_socket_server("tcp://127.0.0.1:8080",$errno,$errstr); if(!$s) echo "$errstr ($errno)\n";`),
		c("php -S", scB, "Failed to listen on", true, "php", "-S", "127.0.0.1:8080"),
		c("perl IO::Socket::INET Listen", scB, "cannot listen:", false, "perl", "-MIO::Socket::INET", "-e",
			`IO::Socket::INET->new(LocalAddr=>"127.0.0.1:8080",Listen=>5) or die "cannot listen: $@\n"`),
		// curl --interface binds 127.0.0.1 without a port (the port is
		// picked in connect(), which then fails): a connect event.
		c("curl --interface 127.0.0.1", scA, "curl: (7)", true, "curl", "-sS", "--interface", "127.0.0.1", url),
		// bind(127.0.0.1:0) with every ephemeral port in use: EADDRINUSE.
		bind(c("GNU wget --bind-address=127.0.0.1 (ports exhausted)", scA, "failed:", true,
			"wget", "-t1", "-T5", "-O", "/dev/null", "--bind-address=127.0.0.1", url), "EADDRINUSE"),
		// bind() to an address of no interface: EADDRNOTAVAIL.
		bind(c("GNU wget --bind-address=192.0.2.1", scC, "failed:", true,
			"wget", "-t1", "-T5", "-O", "/dev/null", "--bind-address=192.0.2.1", url), "EADDRNOTAVAIL"),
		bind(c("ssh -b 192.0.2.1", scC, "bind 192.0.2.1", true, "ssh", "-o", "BatchMode=yes", "-b", "192.0.2.1", "-p", "8080", "127.0.0.1"), "EADDRNOTAVAIL"),
	)
	// glibc asks nscd (/var/run/nscd/socket, absent: ENOENT) before it
	// reads /etc/hosts; the program prints nothing about it.
	nscd := func(r wordingRow) wordingRow { r.errno = "ENOENT"; return r }
	rows = append(rows,
		nscd(c("nscd probe: getent hosts localhost", scC, "localhost", false, "getent", "hosts", "localhost")),
		nscd(c("nscd probe: python getaddrinfo", scC, "127.0.0.1", false, "python3", "-c",
			`import socket; print(socket.getaddrinfo("localhost", 80)[0][4])`)),
	)
	// Programs that retry: Go's dialer (EADDRNOTAVAIL), Go 1.24+ listeners
	// (MPTCP, then TCP: godial is built in this module, go 1.26), redis-cli,
	// Ruby's TCPServer without a host (0.0.0.0, then ::), netcat-traditional
	// (four binds, 2 s apart), apt (InRelease, then Release).
	tries := map[string]int{"go net.Dial": 3, "go log.Fatal(net.Dial)": 3, "go http.Get": 3, "go net.Dial IPv6": 3,
		`go net.Listen ":8080"`: 2, `go net.Listen "127.0.0.1:8080"`: 2, `go http.ListenAndServe ":8080"`: 2,
		"redis-cli": 2, "ruby TCPServer.new(8080)": 2, "apt-get update (its http method)": 2,
		"nc.traditional -p 8080": 4, "nc.traditional -v -p 8080": 4, "nc.traditional -l -p 8080": 4}
	for i := range rows {
		rows[i].tries = tries[rows[i].program]
	}
	return rows
}

// wordingResult is what one row came to.
type wordingResult struct {
	row       wordingRow
	printed   string // the key line the program printed (or its last line)
	predicted string // client_message of the row's first event
	client    string
	verdict   string        // exact, contained, wrong, unknown; "no event"
	events    int           // events of the row's syscall and errno
	attempts  []int         // their attempt numbers (1 when absent)
	gap       time.Duration // the longest between two of them (kernel time)
	side      []string
}

// TestWordingsRealPrograms runs real programs into real failures and judges
// eaddr's client_message against what each program printed: exact (a
// printed line is the message), contained (the message is inside a printed
// line), wrong (neither), unknown (no message). <name> parts of a template
// message match any text. A wrong claim fails, on the row's events and on
// the program's other events alike; so does a catalogued program whose
// message is neither exact nor contained. With EADDR_WORDINGS_REPORT=path
// the results are also written there as a markdown table.
func TestWordingsRealPrograms(t *testing.T) {
	testenv.RequireRoot(t)
	nss := map[string]*netns.NS{
		scA:  eaddrtest.Exhausted(t, "tcp4", "127.0.0.1"),
		scA6: eaddrtest.Exhausted(t, "tcp6", "::1"),
		scB:  listenerNS(t, "tcp4", "127.0.0.1:8080"),
		scC:  testns.New(t),
		scT:  eaddrtest.BlackholeNS(t),
	}
	godial := eaddrtest.BuildGodial(t)
	// --retry-window 10s: whether a program's tries come within eaddr's 50 ms
	// depends on how busy the machine is, and is tested on controlled kernel
	// times (explain.TestAttempts); here the rows are about which tries
	// eaddr links (thread or process, fd, address, the client's count).
	// Each row is a new process, so the window links nothing across rows.
	p := eaddrtest.StartTrace(t, "--errno", "all", "--retry-window", "10s")

	var results []wordingResult
	for _, row := range wordingRows() {
		t.Run(row.scenario+"/"+row.program, func(t *testing.T) {
			argv, ok := wordingArgv(t, row, godial)
			if !ok {
				return
			}
			res := runWordingRow(t, p, nss[row.scenario], row, argv)
			results = append(results, res)
			t.Logf("%-4s %-50s %-9s events=%d attempts=%v (%v apart at most) client=%q predicted=%q printed=%q side=%q",
				row.scenario, row.program, res.verdict, res.events, res.attempts, res.gap, res.client, res.predicted, res.printed, res.side)
		})
	}
	if path := os.Getenv("EADDR_WORDINGS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(wordingsReport(results)), 0o644); err != nil {
			t.Errorf("EADDR_WORDINGS_REPORT: %v", err)
		}
	}
}

// wordingArgv resolves the row's program; a missing one is a skip (a
// failure under EADDR_REQUIRE_BPF=1).
func wordingArgv(t *testing.T, row wordingRow, godial string) ([]string, bool) {
	t.Helper()
	var path string
	switch row.bin {
	case "python3":
		path = demo.Python3()
	case "godial":
		path = godial
	case "wget":
		path = demo.GNUWget()
	case "nc.openbsd":
		path = demo.OpenBSDNC()
	case "apt-get":
		if path = demo.Look("apt-get"); path == "" {
			break
		}
		// Its own source list and lists directory: the node's are not touched.
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "lists", "partial"), 0o755); err != nil {
			t.Fatal(err)
		}
		list := filepath.Join(dir, "eaddr.list")
		if err := os.WriteFile(list, []byte("deb http://127.0.0.1:8080/debian bookworm main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return append([]string{path, "-o", "Dir::Etc::sourcelist=" + list, "-o", "Dir::Etc::sourceparts=-",
			"-o", "Dir::State::Lists=" + filepath.Join(dir, "lists"), "-o", "APT::Sandbox::User=root"}, row.args...), true
	default:
		path = demo.Look(row.bin)
	}
	if path == "" && row.bin == "godial" {
		testenv.Skip(t, "testdata/clients/godial was not built (no go on PATH)")
		return nil, false
	}
	if path == "" {
		testenv.Missing(t, row.bin, wordingPackages[row.bin])
		return nil, false
	}
	for _, m := range wordingModules {
		if m.bin == row.bin && strings.Contains(strings.Join(row.args, " "), m.uses) {
			if err := exec.Command(path, m.check...).Run(); err != nil {
				testenv.Missing(t, m.what, m.pkg)
				return nil, false
			}
		}
	}
	return append([]string{path}, row.args...), true
}

// wordingPackages: the Debian package of each program the rows run
// (TestWordingPackagesListed checks them against .ci/deps.sh).
var wordingPackages = map[string]string{
	"apt-get": "apt", "busybox": "busybox-static", "curl": "curl", "getent": "libc-bin", "git": "git",
	"lwp-request": "libwww-perl", "nc.openbsd": "netcat-openbsd", "nc.traditional": "netcat-traditional",
	"node": "nodejs", "perl": "perl", "php": "php-cli", "psql": "postgresql-client", "python3": "python3",
	"redis-cli": "redis-tools", "ruby": "ruby", "socat": "socat", "ssh": "openssh-client", "wget": "wget",
}

// wordingModules: a row whose program is there can still lack the module it
// uses; such a row skips naming the module's package instead of failing on
// "No module named 'requests'".
var wordingModules = []struct {
	bin, uses string   // the row's program, and what in its arguments needs the module
	check     []string // exits 0 when the module is there
	what, pkg string
}{
	{"python3", "import requests", []string{"-c", "import requests"}, "python3 module requests", "python3-requests"},
	{"perl", "-MLWP::UserAgent", []string{"-MLWP::UserAgent", "-e1"}, "perl module LWP::UserAgent", "libwww-perl"},
	{"php", "curl_init", []string{"-r", `exit(function_exists("curl_init") ? 0 : 1);`}, "php's curl extension", "php-curl"},
}

// TestWordingPackagesListed: every package a wordings row can ask for is one
// that `sudo make deps` installs (apt, perl and libc-bin come with Debian).
func TestWordingPackagesListed(t *testing.T) {
	listed := testenv.DepsPackages(t)
	essential := map[string]bool{"apt": true, "perl": true, "libc-bin": true}
	for _, row := range wordingRows() {
		pkg, ok := wordingPackages[row.bin]
		switch {
		case row.bin == "godial": // built from testdata/clients by the test
		case !ok:
			t.Errorf("row %q: no Debian package for %s in wordingPackages", row.program, row.bin)
		case !listed[pkg] && !essential[pkg]:
			t.Errorf("row %q: %s's package %s is not in .ci/deps.sh", row.program, row.bin, pkg)
		}
	}
	for _, m := range wordingModules {
		if !listed[m.pkg] {
			t.Errorf("%s: package %s is not in .ci/deps.sh", m.what, m.pkg)
		}
	}
	clients, missing := demo.FindClients("127.0.0.1", 8080)
	for _, m := range missing {
		if !listed[m.Package] {
			t.Errorf("demo client %s: package %s is not in .ci/deps.sh", m.Name, m.Package)
		}
	}
	t.Logf("%d rows, %d demo clients here", len(wordingRows()), len(clients))
}

func runWordingRow(t *testing.T, p *eaddrtest.TraceProc, ns *netns.NS, row wordingRow, argv []string) wordingResult {
	t.Helper()
	res := wordingResult{row: row}
	from := p.Count()
	out, pid, err := eaddrtest.RunIn(t.Context(), ns, argv)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	res.printed = keyLine(out, row.key)
	mine := func(ev eaddrtest.JSONEvent) bool { return ev.Syscall == row.syscall && ev.Errno == row.errno }
	// Wait for the row's first event, then let the sentinel flush the rest.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		for _, ev := range p.ForRow(from, ns.Inode()) {
			if mine(ev) {
				n++
			}
		}
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Sentinel(t, "bind")
	worst, retryNote := "", ""
	var last time.Time
	for _, ev := range p.ForRow(from, ns.Inode()) {
		v, msg, client := "unknown", "", ""
		if ev.Explain != nil {
			msg, client = ev.Explain.ClientMessage, ev.Explain.Client
			v = eaddrtest.JudgeWording(msg, out)
		}
		if !mine(ev) {
			res.side = append(res.side, fmt.Sprintf("%s %s: %s %q", ev.Syscall, ev.Errno, v, msg))
			if v == "wrong" {
				t.Errorf("side event %s %s: eaddr claims %s printed %q; it printed:\n%s", ev.Syscall, ev.Errno, client, msg, out)
			}
			continue
		}
		res.events++
		a := ev.Attempt
		if a == 0 {
			a = 1
		}
		res.attempts = append(res.attempts, a)
		if at, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
			if !last.IsZero() {
				res.gap = max(res.gap, at.Sub(last))
			}
			last = at
		}
		if res.events == 1 {
			res.predicted, res.client, worst = msg, client, v
			if ev.Explain != nil {
				retryNote = ev.Explain.Retries
			}
		} else if v != worst {
			t.Errorf("event %d of %d (attempt %d) is %s (%q), the first was %s (%q)", res.events, res.events, a, v, msg, worst, res.predicted)
			if rank(v) > rank(worst) {
				worst = v
			}
		}
	}
	res.verdict = worst
	checkTries(t, row, res, retryNote)
	switch {
	case res.events == 0:
		res.verdict = "no event"
		t.Errorf("no %s %s event for pid %d (%q) within 5s; it printed:\n%s", row.syscall, row.errno, pid, argv, out)
	case worst == "wrong":
		t.Errorf("wrong claim: eaddr says %s printed %q; it printed:\n%s", res.client, res.predicted, out)
	case row.catalogued && worst != "exact" && worst != "contained":
		t.Errorf("catalogued program, verdict %s (client %q, message %q); it printed:\n%s", worst, res.client, res.predicted, out)
	}
	return res
}

// checkTries: a program that makes several failing calls per printed line
// has them numbered 1, 2, ... and its explanation says so.
func checkTries(t *testing.T, row wordingRow, res wordingResult, note string) {
	t.Helper()
	if row.tries == 0 || res.events == 0 {
		return
	}
	want := make([]int, row.tries)
	for i := range want {
		want[i] = i + 1
	}
	if fmt.Sprint(res.attempts) != fmt.Sprint(want) {
		t.Errorf("attempts %v, want %v: one printed line, %d failures", res.attempts, want, row.tries)
	}
	if note == "" {
		t.Errorf("the explanation does not say the program retries (explain.retries)")
	}
}

// rank orders verdicts from best to worst.
func rank(v string) int {
	return map[string]int{"exact": 0, "contained": 1, "unknown": 2, "wrong": 3}[v]
}

// keyLine is the first printed line holding key, else the last non-empty
// line, trimmed.
func keyLine(out, key string) string {
	var last string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if key != "" && strings.Contains(l, key) {
			return l
		}
		last = l
	}
	return last
}

func wordingsReport(results []wordingResult) string {
	cell := func(s string) string {
		s = strings.ReplaceAll(s, "|", `\|`)
		return strings.ReplaceAll(s, "\n", " ⏎ ")
	}
	var b strings.Builder
	b.WriteString(wordingsSummary(results))
	b.WriteString("| program | scenario | printed line | predicted | verdict | events | attempts |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	sorted := append([]wordingResult(nil), results...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].row.scenario < sorted[j].row.scenario })
	for _, r := range sorted {
		v := r.verdict
		if len(r.side) > 0 {
			v += " (side: " + strings.Join(r.side, "; ") + ")"
		}
		pred := r.predicted
		if r.client != "" {
			pred = r.client + ": " + pred
		}
		fmt.Fprintf(&b, "| %s | %s %s %s | `%s` | `%s` | %s | %d | %v |\n", cell(r.row.program), r.row.scenario,
			r.row.syscall, r.row.errno, cell(r.printed), cell(pred), cell(v), r.events, r.attempts)
	}
	return b.String()
}

// embedded are the clients whose words a program prints inside its own
// line (a script's traceback, a log prefix, a wrapper's message): their
// best is "contained". The others print the line themselves.
var embedded = map[string]bool{"Python": true, "Node.js": true, "Go programs": true, "Ruby": true,
	"Perl": true, "Perl LWP": true, "PHP": true, "a libcurl program": true}

// wordingsSummary counts the verdicts: all rows, the programs that print
// their own line, the runtimes and libraries, and the side events.
func wordingsSummary(results []wordingResult) string {
	type tally struct{ rows, exact, contained, unknown, wrong, events int }
	var all, own, emb tally
	side, sideWrong := 0, 0
	add := func(t *tally, r wordingResult) {
		t.rows++
		t.events += r.events
		switch r.verdict {
		case "exact":
			t.exact++
		case "contained":
			t.contained++
		case "wrong":
			t.wrong++
		default:
			t.unknown++
		}
	}
	for _, r := range results {
		add(&all, r)
		if embedded[r.client] {
			add(&emb, r)
		} else if r.row.catalogued {
			add(&own, r)
		}
		for _, sd := range r.side {
			side++
			if strings.Contains(sd, ": wrong ") {
				sideWrong++
			}
		}
	}
	line := func(name string, t tally) string {
		pct := 0.0
		if t.rows > 0 {
			pct = 100 * float64(t.exact) / float64(t.rows)
		}
		return fmt.Sprintf("| %s | %d | %d | %d (%.0f%%) | %d | %d | %d |\n", name, t.rows, t.events, t.exact, pct, t.contained, t.unknown, t.wrong)
	}
	return "| rows | programs and scenarios | events | exact | contained | unknown | wrong |\n|---|---|---|---|---|---|---|\n" +
		line("all", all) + line("programs that print their own line (catalogued)", own) +
		line("runtimes and libraries (inside the program's own line)", emb) +
		fmt.Sprintf("\nOther events of the same programs (nscd and urllib3 probes, DNS): %d, wrong claims among them: %d.\n\n", side, sideWrong)
}

// listenerNS returns a fresh netns in which a listener holds address.
func listenerNS(t *testing.T, network, address string) *netns.NS {
	t.Helper()
	ns := testns.New(t)
	l, err := ns.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return ns
}

// The judge of TestWordingsRealPrograms, on its own (no root needed).
func TestJudgeWording(t *testing.T) {
	printed := "--2026-12-01 16:08:54--  http://127.0.0.1:8080/\n" +
		"curl: (7) Failed to connect to 127.0.0.1 port 8080 after 2 ms: Couldn't connect to server\n" +
		"urllib.error.URLError: <urlopen error [Errno 99] Cannot assign requested address>\n" +
		"psql: error: connection to server at \"127.0.0.1\", port 8080 failed: Connection refused\n" +
		"\tIs the server running on that host and accepting TCP/IP connections?\n"
	for _, tc := range []struct{ msg, want string }{
		{"", "unknown"},
		{"curl: (7) Failed to connect to 127.0.0.1 port 8080 after <ms> ms: Couldn't connect to server", "exact"},
		{"curl: (7) Failed to connect to 127.0.0.1 port 8080 after 0 ms: Couldn't connect to server", "wrong"},
		{"Failed to connect to 127.0.0.1 port 8080 after <ms> ms", "contained"},
		{"--<timestamp>--  http://127.0.0.1:8080/", "exact"},
		{"urllib.error.URLError: <urlopen error [Errno 99] Cannot assign requested address>", "exact"},
		{"<urlopen error [Errno 99] Cannot assign requested address>", "contained"},
		{"psql: error: connection to server at \"127.0.0.1\", port 8080 failed: Connection refused\n" +
			"\tIs the server running on that host and accepting TCP/IP connections?", "exact"},
		{"port 8080 failed: Connection refused\nIs the server running", "contained"},
		{"Is the server running on that host and accepting TCP/IP connections?\npsql: error:", "wrong"},
		{"failed: Connection refused", "contained"},
		{"connect: Cannot assign requested address", "wrong"},
		{"  curl: (7) Failed to connect to <ip> port <port> after <ms> ms: Couldn't connect to server  ", "exact"},
	} {
		if got := eaddrtest.JudgeWording(tc.msg, printed); got != tc.want {
			t.Errorf("judgeWording(%q) = %s, want %s", tc.msg, got, tc.want)
		}
	}
}
