package mountinfo

import (
	"strings"
	"testing"
)

// A mount point containing a space, escaped by the kernel as \040, and
// several optional fields before the separator.
const mountinfoEscaped = `31 1 259:2 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
80 31 0:40 / /mnt/my\040cgroups rw,relatime shared:40 master:3 - cgroup2 none rw
`

func TestParseFields(t *testing.T) {
	ms, err := Parse(strings.NewReader(mountinfoEscaped))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Root: "/", MountPoint: "/", FSType: "ext4"},
		{Root: "/", MountPoint: "/mnt/my cgroups", FSType: "cgroup2"},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %d mounts, want %d: %+v", len(ms), len(want), ms)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mount %d = %+v, want %+v", i, ms[i], want[i])
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:             "/plain",
		`/a\040b`:            "/a b",
		`/tab\011nl\012`:     "/tab\tnl\n",
		`/back\134slash`:     `/back\slash`,
		`/short\04`:          `/short\04`,
		`/notoctal\089`:      `/notoctal\089`,
		`\040\040`:           "  ",
		`/trailing\`:         `/trailing\`,
		`/overflow\400x`:     `/overflow\400x`,
		`/mnt/my\040cgroups`: "/mnt/my cgroups",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
