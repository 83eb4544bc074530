package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/pdeath"
)

// A session is one configuration while it is attached.
type session interface {
	PID() int              // the tracer's process, 0 when there is none
	Attach() time.Duration // from start to ready
	Stop() (totals, error)
}

// totals is what a tracer said about its run when it stopped.
type totals struct {
	Events, Lost uint64
	Known        bool              // Events and Lost were reported
	KV           map[string]string // eaddr: every key of its "stopped" line
	Exit         string            // how the process ended when not cleanly, e.g. "exit status 2"
}

// --- none ---------------------------------------------------------------

type noneSession struct{}

func (noneSession) PID() int              { return 0 }
func (noneSession) Attach() time.Duration { return 0 }
func (noneSession) Stop() (totals, error) { return totals{}, nil }

// --- floor: an empty program on the same two tracepoints -----------------

type floorSession struct {
	prog   *ebpf.Program
	links  []link.Link
	attach time.Duration
}

// startFloor loads `r0 = 0; exit` as a tracepoint program and attaches it to
// syscalls/sys_exit_connect and sys_exit_bind: what the attach point itself
// costs, with no work in the program.
func startFloor() (*floorSession, error) {
	t0 := time.Now()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "bench_floor",
		Type:         ebpf.TracePoint,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("floor: loading the empty program: %w", err)
	}
	s := &floorSession{prog: prog}
	for _, tp := range []string{"sys_exit_connect", "sys_exit_bind"} {
		l, err := link.Tracepoint("syscalls", tp, prog, nil)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("floor: attaching to syscalls/%s: %w", tp, err)
		}
		s.links = append(s.links, l)
	}
	s.attach = time.Since(t0)
	return s, nil
}

func (s *floorSession) PID() int              { return 0 }
func (s *floorSession) Attach() time.Duration { return s.attach }
func (s *floorSession) Stop() (totals, error) {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	s.links = nil
	if s.prog != nil {
		errs = append(errs, s.prog.Close())
		s.prog = nil
	}
	return totals{}, errors.Join(errs...)
}

// --- tracer processes ----------------------------------------------------

// proc is a tracer run as a child process in its own process group (so a
// ctrl-C in the terminal reaches only this driver, which stops it) that the
// kernel kills if this driver dies.
type proc struct {
	cmd    *exec.Cmd
	start  time.Time
	done   chan struct{} // closed when the process has been waited for
	err    error         // from Wait
	mu     sync.Mutex
	lines  []string // stderr, the last few hundred lines
	lineCh chan string
}

func startProc(name string, args []string, stdout io.Writer) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout = stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), lineCh: make(chan string, 64)}
	p.start = time.Now()
	if err := pdeath.Start(cmd, nil); err != nil { // killed with eaddr-bench, and not before
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, l)
			if len(p.lines) > 400 {
				p.lines = append(p.lines[:0], p.lines[len(p.lines)-200:]...)
			}
			p.mu.Unlock()
			select {
			case p.lineCh <- l:
			default:
			}
		}
		io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) PID() int { return p.cmd.Process.Pid }

// tail is the last n lines of stderr, for error messages.
func (p *proc) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// stop sends SIGINT and waits; after grace it kills the process.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		return p.err
	case <-time.After(5 * time.Second):
	}
	// Still running: once more (a second SIGINT also helps a process that
	// was busy draining), then kill it.
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		return fmt.Errorf("%s stopped only after a second SIGINT (%v)", filepath.Base(p.cmd.Path), p.err)
	case <-time.After(grace):
	}
	p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s did not stop within %v of two SIGINTs and was killed", filepath.Base(p.cmd.Path), grace+5*time.Second)
}

// --- eaddr ---------------------------------------------------------------

type eaddrSession struct {
	*proc
	attach time.Duration
}

// startEaddr runs `eaddr trace ...` with stdout to /dev/null and waits for
// the line with msg=attached on stderr.
func startEaddr(ctx context.Context, bin string, args []string, stdout io.Writer) (*eaddrSession, error) {
	p, err := startProc(bin, args, stdout)
	if err != nil {
		return nil, err
	}
	s := &eaddrSession{proc: p}
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case l := <-p.lineCh:
			if strings.Contains(l, "msg=attached") {
				s.attach = time.Since(p.start)
				return s, nil
			}
		case <-p.done:
			// Lines may still sit in lineCh; the tail has them all.
			return nil, fmt.Errorf("eaddr exited before attaching (%v):\n%s", p.err, p.tail(20))
		case <-timeout.C:
			p.stop(5 * time.Second)
			return nil, fmt.Errorf("eaddr did not log 'attached' within 30s:\n%s", p.tail(20))
		case <-ctx.Done():
			p.stop(5 * time.Second)
			return nil, ctx.Err()
		}
	}
}

func (s *eaddrSession) Attach() time.Duration { return s.attach }

// Stop sends SIGINT and reads the totals from the msg=stopped line.
func (s *eaddrSession) Stop() (totals, error) {
	err := s.stop(20 * time.Second)
	var t totals
	if err != nil {
		t.Exit = err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.lines) - 1; i >= 0; i-- {
		if !strings.Contains(s.lines[i], "msg=stopped") {
			continue
		}
		kv := logfmt(s.lines[i])
		ev, err1 := strconv.ParseUint(kv["events"], 10, 64)
		lost, err2 := strconv.ParseUint(kv["lost"], 10, 64)
		if err1 == nil && err2 == nil {
			t.Events, t.Lost, t.Known, t.KV = ev, lost, true, kv
			return t, nil
		}
	}
	return t, fmt.Errorf("eaddr logged no 'msg=stopped events=N ... lost=N' line (%v):\n%s", err, strings.Join(lastN(s.lines, 10), "\n"))
}

func lastN(l []string, n int) []string {
	if len(l) > n {
		return l[len(l)-n:]
	}
	return l
}

// logfmt splits `k=v k="v w"` into a map (good enough for slog's text handler).
func logfmt(line string) map[string]string {
	m := map[string]string{}
	for len(line) > 0 {
		line = strings.TrimLeft(line, " ")
		k, rest, ok := strings.Cut(line, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				v, _ = strconv.Unquote(q)
				rest = rest[len(q):]
			}
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		m[k] = v
		line = rest
	}
	return m
}

// --- bpftrace ------------------------------------------------------------

type bpftraceSession struct {
	*proc
	dir    string
	out    string // bpftrace -o file
	attach time.Duration
}

var (
	btLost  = regexp.MustCompile(`(?m)^Lost (\d+) events`)
	btEvent = regexp.MustCompile(`(?m)^\d+ .* (98|99) -?\d+$`)
)

// startBpftrace runs `bpftrace -o FILE script` (FILE in a fresh directory on
// tmpfs when there is one) and waits until it is ready: "Attaching N
// probes..." is printed and then a failing bind() of this process (to
// 192.0.2.1, not a local address: EADDRNOTAVAIL) shows up in FILE.
func startBpftrace(ctx context.Context, bin, script string) (*bpftraceSession, error) {
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "eaddr-bench-")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "bpftrace.out")
	p, err := startProc(bin, []string{"-o", out, script}, io.Discard)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &bpftraceSession{proc: p, dir: dir, out: out}
	fail := func(err error) (*bpftraceSession, error) {
		s.stop(5 * time.Second)
		os.RemoveAll(dir)
		return nil, err
	}
	sentinel := []byte(fmt.Sprintf("%d eaddr-bench 99 ", os.Getpid()))
	var buf []byte
	var off int64
	attaching := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		select {
		case <-p.done:
			return fail(fmt.Errorf("bpftrace exited before it was ready (%v):\n%s", p.err, p.tail(20)))
		default:
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("bpftrace not ready within 60s:\n%s", p.tail(20)))
		}
		if f, err := os.Open(out); err == nil {
			chunk, _ := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
			f.Close()
			off += int64(len(chunk))
			buf = append(buf, chunk...)
		}
		if !attaching && bytes.Contains(buf, []byte("Attaching")) {
			attaching = true
		}
		if attaching {
			if bytes.Contains(buf, sentinel) {
				s.attach = time.Since(p.start)
				return s, nil
			}
			failingBind()
			// Keep only a line's worth: the file may be busy with other processes' failures.
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				buf = buf[i+1:]
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// failingBind makes one bind() that fails with EADDRNOTAVAIL.
func failingBind() {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{192, 0, 2, 1}}
	unix.Syscall(unix.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
	unix.Close(fd)
}

func (s *bpftraceSession) Attach() time.Duration { return s.attach }

// Stop sends SIGINT, then counts the event lines and "Lost N events" lines
// bpftrace wrote.
func (s *bpftraceSession) Stop() (totals, error) {
	defer os.RemoveAll(s.dir)
	err := s.stop(20 * time.Second)
	var t totals
	if err != nil {
		t.Exit = err.Error()
	}
	f, ferr := os.Open(s.out)
	if ferr != nil {
		return t, errors.Join(err, ferr)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Bytes()
		if m := btLost.FindSubmatch(l); m != nil {
			n, _ := strconv.ParseUint(string(m[1]), 10, 64)
			t.Lost += n
		} else if btEvent.Match(l) {
			t.Events++
		}
	}
	t.Known = sc.Err() == nil
	return t, nil
}
