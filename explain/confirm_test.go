package explain

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/decode"
)

// smallConstants are the numbers the commands hold whatever the text: awk's
// fields ($5, $1), ipv4/ipv6 in sysctl names, port-0, and the 1 a sysctl is
// set to. A port or address is never among them.
var smallConstants = map[string]bool{"0": true, "1": true, "4": true, "5": true, "6": true}

var numberRe = regexp.MustCompile(`[0-9]+(?:\.[0-9]+)*`)

// numbersOf are the numbers (dotted ones whole: 10.96.0.10) in s.
func numbersOf(s string) []string { return numberRe.FindAllString(s, -1) }

// The commands that confirm a cause are built only from what the text
// carries: the ss filter is the ip:port, the ip alone, the port alone, or
// none (then ss counts per destination); no number in a command or in what
// it says it shows comes from anywhere but the text, the errno, or a
// small constant of the command itself.
func TestConfirmInventsNothing(t *testing.T) {
	x, err := NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in, ss string // ss: how the ss command of the answer reads
	}{
		// busybox wget of https: 443, which the text does not say.
		{"wget: can't connect to remote host (1.1.1.1): Address not available", "ss -Htan dst 1.1.1.1 | awk"},
		{"Cannot assign requested address", "ss -Htan | awk '{print $5, $1}' | sort | uniq -c | sort -rn | head"},
		{"curl: (7) Failed to connect to 10.96.0.10 port 443 after 3 ms: Couldn't connect to server", "ss -Htan dst 10.96.0.10:443 | awk"},
		{"curl: (7) Failed to connect to [2001:db8::1]:8443 after 3 ms: Could not connect to server", "ss -Htan dst [2001:db8::1]:8443 | awk"},
		{"wget: can't connect to remote host: Address not available", "ss -Htan | awk"}, // IPv6: busybox prints no address
		{"ssh: connect to host db.example port 5432: Cannot assign requested address", "ss -Htan dport = :5432 | awk"},
		{"dial tcp [fd00::a]:9000: connect: cannot assign requested address", "ss -Htan dst [fd00::a]:9000 | awk"},
		{"listen tcp :8080: bind: address already in use", "ss -Htulnp sport = :8080"},
		{"bind: Address in use", "ss -Htulnp sport = :PORT"},
		{"99", "ss -Htan | awk"},
		{"EADDRINUSE", "ss -Htulnp sport = :PORT"},
	} {
		ids := x.Catalog.Identify(tc.in)
		if len(ids) == 0 {
			t.Errorf("%q not recognised", tc.in)
			continue
		}
		r := x.NewReport(ids)
		all := ""
		for _, c := range r.Confirm {
			all += c.Prefix + " " + c.Run + "\n" + c.Why + "\n"
		}
		if !strings.Contains(all, tc.ss) {
			t.Errorf("%q: no %q in\n%s", tc.in, tc.ss, all)
		}
		allowed := map[string]bool{}
		for _, n := range numbersOf(tc.in) {
			allowed[n] = true
		}
		if r.ID.Errno != 0 {
			allowed[decode.ErrnoName(r.ID.Errno)] = true
		}
		for _, n := range numbersOf(all) {
			if !allowed[n] && !smallConstants[n] {
				t.Errorf("%q: %s is not in the text:\n%s", tc.in, n, all)
			}
		}
		if strings.Contains(all, "{") && !strings.Contains(all, "{print") {
			t.Errorf("%q: a {name} left unfilled:\n%s", tc.in, all)
		}
	}
}

// wordingConstants are numbers a wording holds whatever the text: the
// errno's number (nginx, Python, curl's bind), curl's error codes (7, 28,
// 45), socat's address family and length and Node's unbound local address,
// which follow from an address the text carries (AF_INET: 2, 16 bytes,
// 0.0.0.0:0; AF_INET6: 10, 28 bytes, :::0).
var wordingConstants = map[string]bool{"98": true, "99": true, "7": true, "28": true, "45": true,
	"2": true, "10": true, "16": true, "0.0.0.0": true, "0": true}

// What explain lists as the same failure in other words holds no address
// or port the text does not carry: those parts read <ip>, <port>.
func TestOtherWordingsInventNothing(t *testing.T) {
	x, err := NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		"wget: can't connect to remote host (1.1.1.1): Address not available",
		"Cannot assign requested address",
		"bind: Address in use",
		"curl: (7) Failed to connect to 10.96.0.10 port 443 after 3 ms: Couldn't connect to server",
	} {
		r := x.NewReport(x.Catalog.Identify(in))
		allowed := map[string]bool{}
		for _, n := range numbersOf(in) {
			allowed[n] = true
		}
		for _, w := range r.Other {
			for _, n := range numbersOf(string(w.Text)) {
				if !allowed[n] && !wordingConstants[n] {
					t.Errorf("%q: %s: %q holds %s, which the text does not", in, w.By, w.Text, n)
				}
			}
		}
	}
	// Where the text has the address, it is used.
	r := x.NewReport(x.Catalog.Identify("wget: can't connect to remote host (1.1.1.1): Address not available"))
	found := false
	for _, w := range r.Other {
		if string(w.By) == "OpenBSD nc (glibc, no bind first)" {
			found = true
			if string(w.Text) != "nc: connect to 1.1.1.1 port <port> (tcp) failed: Cannot assign requested address" {
				t.Errorf("OpenBSD nc: %q", w.Text)
			}
		}
	}
	if !found {
		t.Error("no OpenBSD nc wording")
	}
}

// capitals finds a word in capitals, but awk's $NF.
var capitals = regexp.MustCompile(`(?:^|[^$A-Za-z0-9_])([A-Z]{2,})\b`)

// Every check of the catalog fills from an empty reading (nothing carried)
// with only the names confirm knows, and its placeholders in capitals are
// explained.
func TestCatalogChecksFill(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\{([a-z_]+)\}`)
	infos := append([]ErrnoInfo{c.UnknownErrno}, c.Errnos...)
	for _, e := range infos {
		for _, ch := range e.Confirm {
			for _, m := range name.FindAllStringSubmatch(ch.Run+" "+ch.Why, -1) {
				switch m[1] {
				case "ss_dst", "dst", "ip", "port", "errno":
				default:
					t.Errorf("%s %s: check %q has {%s}, which confirm does not fill", e.Errno, e.Syscall, ch.Run, m[1])
				}
			}
		}
		cmds, ph := confirm(e.Confirm, &Identification{}, decode.Connect)
		if len(cmds) == 0 {
			t.Errorf("%s %s: no command", e.Errno, e.Syscall)
		}
		explained := map[string]bool{}
		for _, p := range ph {
			explained[p.Name] = true
		}
		for _, cmd := range cmds {
			for _, m := range capitals.FindAllStringSubmatch(cmd.Prefix+" "+cmd.Run, -1) {
				w := m[1]
				if _, err := decode.ParseErrno(w); err != nil && !explained[w] { // an errno name is no placeholder
					t.Errorf("%s %s: %s in %q is not explained", e.Errno, e.Syscall, w, cmd.Prefix+" "+cmd.Run)
				}
			}
		}
	}
}

// The debug pod explain tells people to run is the one README and
// docs/kubernetes.md document (and deploy's TestDebugCommand runs).
func TestDebugPrefixDocumented(t *testing.T) {
	for _, doc := range []string{"../README.md", "../docs/kubernetes.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), strings.TrimSuffix(DebugPrefix, " --")+" -- \\\n  /eaddr ") {
			t.Errorf("%s does not document %q followed by /eaddr", doc, DebugPrefix)
		}
	}
}
