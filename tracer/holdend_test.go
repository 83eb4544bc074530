package tracer

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type hold_outcome holdend ../bpf/holdend.bpf.c -- -I../bpf

// holdEnd holds a failing connect's end in the kernel until its program has
// taken the socket's error (bpf/holdend.bpf.c): the moment in which eaddr's
// async programs find the socket without it, made on demand. Attach it
// (newHoldEnd) before the tracer, whose programs then run after its holds,
// and attachAfter after.
type holdEnd struct {
	objs holdendObjects
}

func newHoldEnd(t *testing.T) *holdEnd {
	t.Helper()
	testenv.RequireRoot(t)
	h := &holdEnd{}
	if err := loadHoldendObjects(&h.objs, nil); err != nil {
		t.Fatalf("loading bpf/holdend.bpf.c: %+v", err)
	}
	t.Cleanup(func() { h.objs.Close() })
	h.attach(t, h.objs.HoldClose, "")
	h.attach(t, h.objs.HoldEnter, "sys_enter_getsockopt")
	h.attach(t, h.objs.HoldExit, "sys_exit_getsockopt")
	return h
}

// attachAfter attaches see_report and see_exit: after the tracer's
// async_error and exit_getsockopt.
func (h *holdEnd) attachAfter(t *testing.T) {
	h.attach(t, h.objs.SeeReport, "")
	h.attach(t, h.objs.SeeExit, "sys_exit_getsockopt")
}

// attach attaches a tp_btf program (tracepoint "") or a syscalls tracepoint's.
func (h *holdEnd) attach(t *testing.T, prog *ebpf.Program, tracepoint string) {
	t.Helper()
	var l link.Link
	var err error
	if tracepoint == "" {
		l, err = link.AttachTracing(link.TracingOptions{Program: prog})
	} else {
		l, err = link.Tracepoint("syscalls", tracepoint, prog, nil)
	}
	if err != nil {
		t.Fatalf("attaching %v: %v", prog, err)
	}
	t.Cleanup(func() { l.Close() })
}

// arm makes the next failing connect of the socket with this cookie be held
// until its error is taken by process pid, which runs only on CPU cpu; late:
// and that process's getsockopt be held until the kernel reported the error.
func (h *holdEnd) arm(t *testing.T, cookie uint64, pid, cpu int, late bool) {
	t.Helper()
	v := h.objs.holdendVariables
	h.set(t, v.TargetCookie, uint64(0))
	for _, s := range []struct {
		v   *ebpf.Variable
		val any
	}{
		{v.TakerPid, uint32(pid)}, {v.TakerCpu, uint32(cpu)}, {v.Late, boolU32(late)},
		{v.Released, uint32(0)}, {v.Reported, uint32(0)}, {v.Held, uint32(0)},
		{v.ErrAfter, int32(0)}, {v.Optval, uint64(0)}, {v.TargetCookie, cookie},
	} {
		h.set(t, s.v, s.val)
	}
}

// outcome says how hold_close ended, and the socket's error when it did.
func (h *holdEnd) outcome(t *testing.T) (holdendHoldOutcome, int32) {
	t.Helper()
	var held uint32
	var errAfter int32
	if err := h.objs.Held.Get(&held); err != nil {
		t.Fatal(err)
	}
	if err := h.objs.ErrAfter.Get(&errAfter); err != nil {
		t.Fatal(err)
	}
	return holdendHoldOutcome(held), errAfter
}

func (h *holdEnd) set(t *testing.T, v *ebpf.Variable, val any) {
	t.Helper()
	if err := v.Set(val); err != nil {
		t.Fatal(err)
	}
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
