package decode

import (
	"bytes"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/recorded"
)

// TestCopyToOwnsItsBytes: a copy keeps what it was after its source is
// decoded again, for every byte slice (comm, exe, argv, a unix path), and
// copying allocates nothing.
func TestCopyToOwnsItsBytes(t *testing.T) {
	d := fixedDecoder()
	first, second := recorded.Raw(t, "connect-enoent-curl-unix"), recorded.Raw(t, "bind-eaddrinuse-python3-ipv4")
	var src, dst Event
	d.Decode(first, &src)
	src.CopyTo(&dst)
	want := struct{ comm, exe, args, path string }{string(src.Comm), string(src.ExeName), string(src.Args), string(src.Remote.Path)}
	if want.path == "" || want.comm == "" || want.args == "" {
		t.Fatalf("the recorded unix event has no path, comm or argv: %+v", want)
	}
	d.Decode(second, &src)
	got := struct{ comm, exe, args, path string }{string(dst.Comm), string(dst.ExeName), string(dst.Args), string(dst.Remote.Path)}
	if got != want {
		t.Errorf("after the source was decoded again the copy reads %+v, want %+v", got, want)
	}
	if bytes.Equal(src.Comm, dst.Comm) {
		t.Errorf("the second event has the same comm %q: the test cannot tell a shared buffer", src.Comm)
	}
	var again Event
	if n := testing.AllocsPerRun(100, func() { dst.CopyTo(&again) }); n != 0 {
		t.Errorf("CopyTo allocates %.0f times", n)
	}
	if string(again.Remote.Path) != want.path || &again.Remote.Path[0] == &dst.Remote.Path[0] {
		t.Errorf("copy of a copy: path %q, shares its buffer: %v", again.Remote.Path, &again.Remote.Path[0] == &dst.Remote.Path[0])
	}
}

// TestCopyToHandMade: a Path not from the decoder is copied, not re-pointed
// into a buffer it never was in.
func TestCopyToHandMade(t *testing.T) {
	src := Event{Remote: Addr{Valid: true, Family: AFUnix, Path: []byte("/run/x.sock")}}
	var dst Event
	src.CopyTo(&dst)
	src.Remote.Path[0] = '!'
	if string(dst.Remote.Path) != "/run/x.sock" {
		t.Errorf("copy reads %q", dst.Remote.Path)
	}
}
