package sockscene

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// execComm waits until pid's comm is want, the program it execs, and
// returns it. exec.Cmd.Start returns once the exec's close-on-exec pipe
// closes, and the kernel sets the new comm after that (setup_new_exec
// after begin_new_exec): a slow machine (a TCG guest) showed the test
// binary's comm there.
func (r *rig) execComm(pid int, want string) string {
	r.t.Helper()
	var comm string
	r.waitFor("holder "+strconv.Itoa(pid)+" execs "+want, func() (bool, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		comm = strings.TrimSpace(string(b))
		return err == nil && comm == want, err
	})
	return comm
}

// hand gives the sockets fds to a new `sleep 3600` started inside the
// netns (through ExtraFiles: they are its fds 3, 4, ...), closes the
// test's copies and records the holder in s. From then on only the holder
// holds them; cleanup kills it.
func (r *rig) hand(s *Scene, role string, fds []int) Holder {
	r.t.Helper()
	h := Holder{Role: role, Sockets: len(fds)}
	files := make([]*os.File, 0, len(fds))
	for _, fd := range fds {
		var st unix.Stat_t
		r.must(unix.Fstat(fd, &st), "fstat")
		h.Inodes = append(h.Inodes, st.Ino)
		h.Locals = append(h.Locals, localOf(fd))
		files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("socket:[%d]", st.Ino)))
	}
	cmd := exec.Command(r.sleep, "3600")
	cmd.ExtraFiles = files
	// If the test process dies before its cleanup (killed by a timeout),
	// the holder dies with it instead of keeping the netns for an hour
	// (ns.Start forks it through pdeath.Start, from a thread kept for its
	// life: the signal follows the forking thread, not the process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := r.ns.Start(cmd)
	if err == nil {
		r.mu.Lock()
		r.holders = append(r.holders, cmd)
		r.mu.Unlock()
	}
	for i, f := range files {
		r.forget(fds[i])
		f.Close() // the test's copy; on error the sockets go with it
	}
	r.must(err, "start holder")
	h.PID = cmd.Process.Pid
	h.Comm = r.execComm(h.PID, filepath.Base(r.sleep))
	h.StartTime, err = StartTime(h.PID)
	r.must(err, "holder start time")
	s.Holders = append(s.Holders, h)
	return h
}

// localOf is the address fd is bound to (getsockname), zero on error.
func localOf(fd int) netip.AddrPort {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// StartTime is field 22 of /proc/PID/stat (starttime, in clock ticks
// since boot): with the pid it names one process, never a later one.
func StartTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// comm (field 2) is in parentheses and may hold spaces: count after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields after comm", pid, len(f))
	}
	return f[19], nil // fields 3.. start at f[0]; 22 is f[19]
}
