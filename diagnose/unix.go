package diagnose

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/internal/procroot"
)

// unixFailure reports whether ev is a failure of a unix-domain socket: its
// diagnosis is about a socket file or an abstract name, never about ports.
func unixFailure(ev *decode.Event) bool {
	if ev.NodePort {
		return false
	}
	return (ev.HasSocket && ev.Family == decode.AFUnix) || unixAddr(ev).Family == decode.AFUnix
}

func unixAddr(ev *decode.Event) *decode.Addr {
	if ev.Syscall == decode.Bind {
		return &ev.Local
	}
	return &ev.Remote
}

// unixPath is the path or "@name" that bind() or connect() was given, nil
// when it could not be read.
func unixPath(ev *decode.Event) []byte {
	a := unixAddr(ev)
	if !a.Valid || a.Unreadable || a.Family != decode.AFUnix || len(a.Path) == 0 {
		return nil
	}
	return a.Path
}

// unixErrno: the unix failures with a diagnosis.
func unixErrno(ev *decode.Event) bool {
	switch ev.Syscall {
	case decode.Bind:
		return ev.Errno == decode.EADDRINUSE
	case decode.Connect:
		return ev.Errno == int(unix.ECONNREFUSED) || ev.Errno == int(unix.ENOENT)
	}
	return false
}

// unixLook is what a unix snapshot found about one name.
type unixLook struct {
	name     string
	abstract bool   // "@name": per netns, no file
	file     string // a path's kind: "socket", "directory", ...; "" when absent or unknown
	full     string // a path made absolute in the process's root (relative ones from its cwd)
	fileErr  error  // nil, errNoFile, or why the file could not be looked at
	byName   bool   // sockets were matched by bound name (/proc/net/unix), not by the file's inode
	dirGone  bool   // the path's directory does not exist either
	listen   int    // sockets bound to the name that listen
	bound    int    // sockets bound to the name
	netns    uint64 // the other netns whose sockets are bound to the file; 0: the event's
	searched int    // other netns searched for the file's sockets, of
	others   int    // the other netns of live processes
}

var errNoFile = errors.New("no such file")

// unixSnapshot diagnoses a unix bind() EADDRINUSE, connect() ECONNREFUSED
// or ENOENT: the file at the path (in the failing process's filesystem),
// and the sockets of the netns bound to the path or abstract name (their
// file's inode must be the file's), with their states and holders.
func (d *Diagnoser) unixSnapshot(ev *decode.Event, g *Diagnosis, now time.Time) {
	u := unixLook{name: string(unixPath(ev))}
	u.abstract = u.name[0] == '@'
	var st unix.Stat_t
	if !u.abstract {
		st, u.full, u.fileErr, u.dirGone = d.statUnixPath(ev, u.name)
		if u.fileErr == nil {
			u.file = fileKind(st.Mode)
		}
	}
	if u.fileErr != nil && u.fileErr != errNoFile {
		g.Err = u.fileErr.Error()
		g.Verdict = fmt.Sprintf("no diagnosis: %s could not be looked at in the filesystem of pid %d: %v", u.name, ev.PID, u.fileErr)
		return
	}
	if u.abstract || u.file == "socket" {
		ns, err := d.openNetns(ev, now)
		if err != nil {
			d.noNetns(ev, g, err)
			return
		}
		defer ns.Close()
		if err := d.unixSockets(ns, &u, &st, g); err != nil {
			g.Err = err.Error()
			g.Verdict = "no diagnosis: sock_diag: " + err.Error()
			return
		}
	} else {
		d.Snapshots++ // the file is the whole answer
	}
	switch {
	case ev.Syscall == decode.Bind:
		unixBindInUse(g, &u)
	case ev.Errno == int(unix.ECONNREFUSED):
		unixRefused(g, &u)
	default:
		unixNoEnt(g, &u)
	}
}

// unixSockets counts the sockets of ns bound to u.name: by the socket
// file's inode when sock_diag gives it, else (the /proc/net/unix fallback)
// by the name as bound. A socket file that no socket of ns is bound to may
// be bound from another netns: those of live processes are searched, within
// ElsewhereWait, before a file is called stale.
func (d *Diagnoser) unixSockets(ns *netdiag.Netns, u *unixLook, st *unix.Stat_t, g *Diagnosis) error {
	found, err := d.unixIn(ns, u, st, g)
	if err != nil || found || u.abstract {
		return err
	}
	deadline := time.Now().Add(d.ElsewhereWait)
	u.searched, u.others, err = netdiag.EachNetns(ns.Inode(), deadline, func(n *netdiag.Netns) bool {
		found, _ := d.unixIn(n, u, st, g)
		if found {
			u.netns = n.Inode()
		}
		return found
	})
	return err
}

// unixIn counts the sockets of ns bound to u's name or file into u and g,
// and finds their holders; it reports whether there were any.
func (d *Diagnoser) unixIn(ns *netdiag.Netns, u *unixLook, st *unix.Stat_t, g *Diagnosis) (bool, error) {
	socks, byName, err := ns.DumpUnix()
	if err != nil {
		return false, err
	}
	u.byName = u.byName || byName
	states := map[string]int{}
	inodes := map[uint64]bool{}
	perInode := map[uint64]int{}
	for _, s := range socks {
		var match bool
		switch {
		case u.abstract:
			match = sameAbstract(s.Name, u.name)
		case s.VFSIno != 0:
			match = s.VFSIno == st.Ino && s.VFSDev == st.Dev
		default:
			match = s.Name == u.name || s.Name == u.full
		}
		if !match {
			continue
		}
		u.bound++
		if s.State == netdiag.StateListen {
			u.listen++
		}
		states[unixStateName(s.State)]++
		inodes[s.Inode] = true
		perInode[s.Inode]++
	}
	if u.bound == 0 {
		return false, nil
	}
	g.States = sortedCounts(states)
	g.Holders = d.holders(ns, perInode)
	return true, nil
}

// sameAbstract compares abstract names; /proc/net/unix shows their NULs as '@'.
func sameAbstract(listed, want string) bool {
	if listed == want {
		return true
	}
	return len(listed) == len(want) && listed == strings.ReplaceAll(want, "\x00", "@")
}

// unixStateName names a unix socket's state as ss does, in the words of
// the inet states: LISTEN, ESTABLISHED (connected) or UNCONNECTED.
func unixStateName(s uint8) string {
	switch s {
	case 7:
		return "UNCONNECTED"
	case 1, 10:
		return netdiag.StateName(s)
	}
	return "unknown:" + strconv.Itoa(int(s))
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	}
	return "special file"
}

// statUnixPath stats path as the failing process sees it: inside its root
// (RESOLVE_IN_ROOT: symlinks resolve in the container), relative paths
// from its cwd. If it exited, its parent or a process seen in its netns
// stands in, if in the same mount namespace (absolute paths only). The
// error is errNoFile when the path does not exist; dirGone says whether its
// directory does not exist either.
func (d *Diagnoser) statUnixPath(ev *decode.Event, path string) (st unix.Stat_t, full string, err error, dirGone bool) {
	pids := []int{int(ev.PID)}
	if strings.HasPrefix(path, "/") {
		pids = append(pids, int(ev.PPID))
		if pid, ok := d.pidByNetNS[ev.NetNS]; ok {
			pids = append(pids, pid)
		}
	}
	err = errors.New("the process has exited and no other process of its mount namespace is known")
	for _, pid := range pids {
		root, full, e := procroot.Process(pid, ev.MntNS, path)
		if e != nil {
			continue
		}
		defer unix.Close(root)
		if st, err = statInRoot(root, full); err == errNoFile {
			_, e := statInRoot(root, filepath.Dir(full))
			dirGone = e == errNoFile
		}
		return st, full, err, dirGone
	}
	return st, "", err, false
}

// statInRoot stats path resolved inside root, following symlinks there.
func statInRoot(root int, path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := procroot.OpenAt(root, path, unix.O_PATH|unix.O_CLOEXEC)
	switch {
	case err == unix.ENOENT:
		return st, errNoFile
	case err != nil:
		return st, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, fmt.Errorf("stat %s: %w", path, err)
	}
	return st, nil
}

// unixHolderFix is "pid N (comm)" of the first holder, "" when none.
func unixHolder(g *Diagnosis) string {
	if len(g.Holders) == 0 {
		return ""
	}
	return fmt.Sprintf("pid %d (%s)", g.Holders[0].PID, g.Holders[0].Comm)
}

// bind() EADDRINUSE on a unix socket: the name is bound, or a file exists.
func unixBindInUse(g *Diagnosis, u *unixLook) {
	h := unixHolder(g)
	switch {
	case u.abstract && u.bound > 0:
		g.Verdict = fmt.Sprintf("the abstract unix socket name %s is taken (%s%s)", u.name, countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "stop the process that holds it"+orUnknown(h)+", or bind another name")
	case u.abstract:
		g.Verdict = fmt.Sprintf("the abstract unix socket name %s is free now: whatever held it is gone", u.name)
	case u.fileErr == errNoFile:
		g.Verdict = fmt.Sprintf("%s does not exist now: it was removed after bind() failed", u.name)
	case u.file != "socket":
		g.Verdict = fmt.Sprintf("%s exists and is a %s, not a socket: bind() never replaces an existing file", u.name, u.file)
		g.Fix = append(g.Fix, "bind another path, or move the "+u.file+" away")
	case u.bound > 0:
		g.Verdict = fmt.Sprintf("the socket file %s is in use%s (%s%s)", u.name, otherNetns(u), countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "another server already runs on this path: stop the process that holds it"+orUnknown(h)+", or bind another path; removing the file would cut that server off from new clients")
	default:
		g.Verdict = fmt.Sprintf("%s %s: it exists but %s (a process bound it and exited without unlink())%s", staleWord(u), u.name, nobodyBound(u), byNameCaveat(u))
		g.Fix = append(g.Fix, fmt.Sprintf("%sremove the stale socket file %s (a server should unlink() its path before bind())", ifUnsure(u), u.name))
	}
}

// otherNetns says where the sockets bound to a file are, when not in the
// event's netns.
func otherNetns(u *unixLook) string {
	if u.netns == 0 {
		return ""
	}
	return fmt.Sprintf(" by a socket of another network namespace (%d)", u.netns)
}

// staleWord: a file is stale for sure only when every netns was searched.
func staleWord(u *unixLook) string {
	if u.searched < u.others {
		return "probably a stale socket file"
	}
	return "stale socket file"
}

func ifUnsure(u *unixLook) string {
	if u.searched < u.others {
		return "if no server uses it, "
	}
	return ""
}

// nobodyBound says which netns were searched for a socket bound to the file.
func nobodyBound(u *unixLook) string {
	if u.searched < u.others {
		return fmt.Sprintf("no socket of this network namespace, nor of %d of the %d others (the search stopped at its time budget), is bound to it", u.searched, u.others)
	}
	return "no socket of any network namespace with a live process is bound to it"
}

// byNameCaveat says what a match by bound name (the /proc/net/unix
// fallback) cannot see.
func byNameCaveat(u *unixLook) string {
	if !u.byName {
		return ""
	}
	return "; without unix_diag, sockets were matched by the name they were bound with (/proc/net/unix), so one bound to this file through another path is not seen"
}

func orUnknown(holder string) string {
	if holder == "" {
		return " (its process could not be found)"
	}
	return ": " + holder
}

// connect() ECONNREFUSED on a unix socket: nothing listens on the name (the
// kernel found no socket bound to the file, or one that does not listen).
func unixRefused(g *Diagnosis, u *unixLook) {
	h := unixHolder(g)
	switch {
	case u.listen > 0:
		g.Verdict = fmt.Sprintf("%s has a listener now%s (%s%s): it did not listen yet, or no longer, when connect() failed", u.name, otherNetns(u), countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "start the client after the server listens, or retry connect()")
	case u.bound > 0:
		g.Verdict = fmt.Sprintf("nobody listens on %s: it is bound%s but not listening (%s%s)", u.name, otherNetns(u), countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "the process that bound it"+orUnknown(h)+" has not called listen(), or is a datagram socket: check the server and the socket type")
	case u.abstract:
		g.Verdict = fmt.Sprintf("nobody listens on the abstract unix socket name %s: no socket of this network namespace has that name (abstract names are per network namespace)", u.name)
		g.Fix = append(g.Fix, "start the server, or run the client in the server's network namespace")
	case u.fileErr == errNoFile:
		g.Verdict = fmt.Sprintf("%s does not exist now: it was removed after connect() was refused", u.name)
	case u.file != "socket":
		g.Verdict = fmt.Sprintf("%s is a %s, not a socket", u.name, u.file)
		g.Fix = append(g.Fix, "connect to the server's socket path")
	default:
		g.Verdict = fmt.Sprintf("%s %s: nobody listens on it (%s; the server exited without removing it)%s", staleWord(u), u.name, nobodyBound(u), byNameCaveat(u))
		g.Fix = append(g.Fix, fmt.Sprintf("start the server (it should unlink() the stale file before bind()), or %sremove the stale socket file %s", ifUnsure(u), u.name))
	}
}

// connect() ENOENT on a unix socket: there is no socket file at the path.
func unixNoEnt(g *Diagnosis, u *unixLook) {
	switch {
	case u.abstract:
		g.Verdict = fmt.Sprintf("no such abstract unix socket name %s", u.name)
	case u.fileErr == nil:
		g.Verdict = fmt.Sprintf("%s exists now (a %s): it was created after connect() failed, the client started before the server", u.name, u.file)
		g.Fix = append(g.Fix, "start the client after the server is ready, or retry connect()")
	case u.dirGone:
		g.Verdict = fmt.Sprintf("no such socket file %s: not even its directory %s exists in the process's filesystem", u.name, filepath.Dir(u.name))
		g.Fix = append(g.Fix, "fix the path; in a container the socket's directory must be mounted (hostPath or a shared emptyDir) where the client looks for it")
	default:
		g.Verdict = fmt.Sprintf("no such socket file %s: the server is not running, has not created it yet, or uses another path", u.name)
		g.Fix = append(g.Fix, "start the server, or fix the path; in a container the socket file must be in a volume the client shares with the server")
	}
}
