//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/eaddr/eaddr/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// BTFPath is where the kernel exposes its own type information (CONFIG_DEBUG_INFO_BTF).
const BTFPath = "/sys/kernel/btf/vmlinux"

// MinKernel is the oldest kernel that has everything eaddr uses: the BPF ring
// buffer (5.8), bpf_get_current_task_btf (5.11) and bpf_task_pt_regs (5.15).
const MinKernel = "5.15"

// Capabilities (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// Probe checks, in order, what loading eaddr needs, and returns one sentence
// per failure that tells the operator what is missing. It mounts tracefs at
// /sys/kernel/tracing when no tracefs is mounted, as every tracer needs it to
// find tracepoint ids; log says when it does.
func Probe(log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkCaps(); err != nil {
		return err
	}
	if _, err := os.Stat(BTFPath); err != nil {
		return fmt.Errorf("this kernel exposes no BTF at %s (%v): eaddr needs a kernel built with CONFIG_DEBUG_INFO_BTF=y, Linux %s or newer", BTFPath, errors.Unwrap(err), MinKernel)
	}
	dir, err := tracefsDir(log)
	if err != nil {
		return err
	}
	for _, tp := range []string{"sys_exit_connect", "sys_exit_bind"} {
		if _, err := os.Stat(filepath.Join(dir, "events/syscalls", tp, "id")); err != nil {
			return fmt.Errorf("tracepoint syscalls/%s is missing under %s: the kernel needs CONFIG_FTRACE_SYSCALLS=y", tp, dir)
		}
	}
	for _, f := range kernelFeatures {
		if err := supported(f.check(), log, f.what, f.version); err != nil {
			return err
		}
	}
	return nil
}

// kernelFeatures are what Probe asks the kernel for, after BTF and the
// tracepoints; each says what it is and since when Linux has it.
var kernelFeatures = []struct {
	what, version string
	check         func() error
}{
	{"the BPF ring buffer", "5.8", func() error { return features.HaveMapType(ebpf.RingBuf) }},
	{"the helper bpf_get_current_task_btf", "5.11", helper(asm.FnGetCurrentTaskBtf)},
	{"the helper bpf_task_pt_regs", "5.15", helper(asm.FnTaskPtRegs)},
	{"the helper bpf_ktime_get_boot_ns", "5.8", helper(asm.FnKtimeGetBootNs)},
}

func helper(fn asm.BuiltinFunc) func() error {
	return func() error { return features.HaveProgramHelper(ebpf.TracePoint, fn) }
}

// supported follows the features contract: nil is supported, ErrNotSupported
// is not, and anything else is inconclusive: logged, and loading goes on.
func supported(err error, log *slog.Logger, what, version string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("kernel %s is too old: eaddr needs %s (Linux %s or newer; all of eaddr needs %s)", kernelRelease(), what, version, MinKernel)
	default:
		log.Warn("feature probe inconclusive, trying to load anyway", "feature", what, "err", err)
		return nil
	}
}

func checkCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("cannot read this process's capabilities: %w", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	return privilegeError("root (or CAP_BPF and CAP_PERFMON) is needed to load the BPF programs: run eaddr with sudo")
}

// ErrPrivilege is in the error chain when eaddr lacks the privilege to load
// its programs: the CLI exits 3 then, as every command does that cannot
// look for want of a privilege.
var ErrPrivilege = errors.New("no privilege")

// privilegeError says which privilege is missing, and is ErrPrivilege.
type privilegeError string

func (e privilegeError) Error() string        { return string(e) }
func (e privilegeError) Is(target error) bool { return target == ErrPrivilege }

// tracefsDir returns where tracefs is mounted, mounting it when it is not.
func tracefsDir(log *slog.Logger) (string, error) {
	if dir := mountedTracefs(); dir != "" {
		return dir, nil
	}
	const dir = "/sys/kernel/tracing"
	if err := unix.Mount("tracefs", dir, "tracefs", 0, ""); err != nil {
		return "", fmt.Errorf("tracefs is not mounted and mounting it at %s failed (%v): mount it with `mount -t tracefs tracefs %s`", dir, err, dir)
	}
	log.Debug("mounted tracefs, which was not mounted", "path", dir)
	return dir, nil
}

func mountedTracefs() string {
	mounts, _ := mountinfo.Self()
	for _, m := range mounts {
		if m.FSType == "tracefs" {
			return m.MountPoint
		}
	}
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == unix.TRACEFS_MAGIC {
			return dir
		}
	}
	return ""
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "(unknown)"
	}
	return unix.ByteSliceToString(u.Release[:])
}
