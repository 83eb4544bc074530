// Package demo holds what `eaddr demo` runs, apart from the CLI: the real
// client programs it finds on this machine (curl, GNU wget, busybox wget and
// nc, OpenBSD nc, python3), with the failure eaddr should see from each, and
// RunIn, which runs one inside a network namespace. The end-to-end tests run
// the same clients.
package demo

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// Client is a real program that the demo (and the integration tests) run
// against an exhausted destination, with what eaddr should see from it.
type Client struct {
	Name    string   // label, e.g. "busybox wget"
	Argv    []string // resolved argv[0] first
	Comm    string   // the comm the kernel will report
	Syscall decode.Syscall
	Errno   int
	Libc    string // the libc it is known to use, when the test knows
	// Unknown: a program whose wording eaddr does not know (a test's own C
	// program): eaddr must not claim a line for it.
	Unknown bool
}

// MissingClient is a client that is not installed, with the Debian package
// that installs it.
type MissingClient struct{ Name, Package string }

// FindClients returns the clients installed on this machine, set up to
// connect to host:port. missing lists the ones that are not installed.
func FindClients(host string, port int) (found []Client, missing []MissingClient) {
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	url := "http://" + hp + "/"
	p := strconv.Itoa(port)
	add := func(name, pkg, path string, args ...string) {
		if path == "" {
			missing = append(missing, MissingClient{name, pkg})
			return
		}
		found = append(found, Client{
			Name: name, Argv: append([]string{path}, args...), Comm: CommOf(path),
			Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL,
		})
	}
	add("curl", "curl", Look("curl"), "-sS", "-m", "5", url)
	add("GNU wget", "wget", GNUWget(), "-t1", "-T5", "-O", "/dev/null", url)
	bb := Look("busybox")
	// No -T: busybox 1.35's wget (Debian 12) segfaults when given -T.
	add("busybox wget", "busybox-static", bb, "wget", "-O", "/dev/null", url)
	add("busybox nc", "busybox-static", bb, "nc", host, p)
	add("OpenBSD nc", "netcat-openbsd", OpenBSDNC(), "-v", "-w", "3", host, p)
	add("python3", "python3", Python3(), "-c", "import socket; socket.create_connection(('"+host+"', "+p+"), timeout=5)")
	return found, missing
}

// MissingLine says which clients the demo skipped and what installs them:
// "not installed here, skipped: busybox wget, busybox nc; to run them too:
// sudo apt-get install busybox-static".
func MissingLine(missing []MissingClient) string {
	var names, pkgs []string
	for _, m := range missing {
		names = append(names, m.Name)
		if !slices.Contains(pkgs, m.Package) {
			pkgs = append(pkgs, m.Package)
		}
	}
	return "not installed here, skipped: " + strings.Join(names, ", ") +
		"; to run them too: sudo apt-get install " + strings.Join(pkgs, " ")
}

// Look is name's path in $PATH, or "" when it is not installed.
func Look(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

// GNUWget is wget when it is GNU Wget, not a busybox link.
func GNUWget() string {
	p := Look("wget")
	if p == "" {
		return ""
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("GNU Wget")) {
		return ""
	}
	return p
}

// OpenBSDNC is Debian's netcat-openbsd, under either of its names.
func OpenBSDNC() string {
	if p := Look("nc.openbsd"); p != "" {
		return p
	}
	p := Look("nc")
	if p == "" {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil && filepath.Base(r) == "nc.openbsd" {
		return p
	}
	return ""
}

// Python3 prefers the system interpreter: a version manager's shim is a
// shell script whose comm would not be python3.
func Python3() string {
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return Look("python3")
}

// CommOf is what the kernel puts in comm for an exec of path: the base name
// as passed to execve (not the symlink target), cut to 15 bytes.
func CommOf(path string) string {
	b := filepath.Base(path)
	if len(b) > 15 {
		b = b[:15]
	}
	return b
}
