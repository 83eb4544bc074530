package explain

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/decode"
)

// The program an interpreter runs, from argv as the kernel gives it
// (NUL-separated, cut at 64 bytes).
func TestAppendProgram(t *testing.T) {
	for _, tc := range []struct {
		runtime, argv, want string
		ok                  bool
	}{
		{runtimePython, "python3\x00-u\x00-m\x00http.server\x008080\x00", "-m http.server", true},
		{runtimePython, "python3\x00-X\x00dev\x00/srv/app/main.py\x00", "main.py", true},
		{runtimePython, "python3\x00-c\x00import socket\x00", "-c", true},
		{runtimeNode, "node\x00--require\x00./tracing.js\x00server.js\x00", "server.js", true},
		{runtimeNode, "node\x00-e\x00fetch()\x00", "-e", true},
		{runtimeJava, "java\x00-cp\x00/app/lib/*\x00-Xmx1g\x00com.example.Main\x00", "com.example.Main", true},
		{runtimeJava, "java\x00-Dx=y\x00-jar\x00/opt/app/app.jar\x00", "-jar app.jar", true},
		{runtimeRuby, "ruby\x00-e\x00TCPServer.new(8080)\x00", "-e", true},
		{runtimePHP, "php\x00-d\x00x=1\x00artisan\x00", "artisan", true},
		{runtimePerl, "perl\x00-MLWP::UserAgent\x00-e\x00...\x00", "-MLWP::UserAgent -e", true},
		// Cut by the 64-byte limit inside the script's name.
		{runtimePython, "python3\x00/very/long/path/to/the/applicat", "applicat...", true},
		// Cut inside an option: nothing is claimed.
		{runtimePython, "python3\x00--chec", "", false},
		{runtimePython, "python3\x00", "", false},
		{runtimeC, "curl\x00http://x/\x00", "", false},
		{runtimeGo, "app\x00", "", false},
	} {
		got, ok := appendProgram(nil, tc.runtime, []byte(tc.argv))
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("%s %q: %q %v, want %q %v", tc.runtime, strings.ReplaceAll(tc.argv, "\x00", " "), got, ok, tc.want, tc.ok)
		}
	}
}

// Options decide some wordings: -v, combined -zv, not after "--", not in
// argv[0], not a long option.
func TestHasFlag(t *testing.T) {
	for _, tc := range []struct {
		argv string
		c    byte
		want bool
	}{
		{"nc\x00-v\x00h\x00", 'v', true},
		{"nc\x00-zv\x00h\x00", 'v', true},
		{"nc\x00-w\x003\x00h\x00", 'v', false},
		{"nc\x00--verbose\x00h\x00", 'v', false},
		{"-v\x00h\x00", 'v', false},
		{"nc\x00--\x00-v\x00", 'v', false},
		{"nc\x00-l\x00-p\x008080", 'l', true},
		{"", 'v', false},
	} {
		if got := hasFlag([]byte(tc.argv), tc.c); got != tc.want {
			t.Errorf("hasFlag(%q, %c) = %v, want %v", tc.argv, tc.c, got, tc.want)
		}
	}
}

// The address shapes some clients print.
func TestRenderShapedAddresses(t *testing.T) {
	for _, tc := range []struct {
		tmpl, ip string
		port     uint16
		want     string
	}{
		{"{addr_full}", "::1", 8080, "[0000:0000:0000:0000:0000:0000:0000:0001]:8080"},
		{"{addr_full}", "10.0.0.1", 80, "10.0.0.1:80"},
		{"listen tcp {listen_addr}:", "::", 8080, "listen tcp <host>:8080:"},
		{"listen tcp {listen_addr}:", "127.0.0.1", 8080, "listen tcp 127.0.0.1:8080:"},
		{"Local ({local_any})", "::1", 80, "Local (:::0)"},
		{"Local ({local_any})", "10.0.0.1", 80, "Local (0.0.0.0:0)"},
		{"bind(5, {lbrace}AF=2 {addr}{rbrace}, 16)", "10.0.0.1", 80, "bind(5, {AF=2 10.0.0.1:80}, 16)"},
	} {
		ip := netip.MustParseAddr(tc.ip)
		v := msgVars{IP: ip, Port: tc.port, Family: decode.AFInet}
		if ip.Is6() {
			v.Family = decode.AFInet6
		}
		if got, ok := render(nil, tc.tmpl, &v); !ok || string(got) != tc.want {
			t.Errorf("render(%q, %s) = %q %v, want %q", tc.tmpl, tc.ip, got, ok, tc.want)
		}
	}
}
