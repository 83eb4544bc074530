// Package mountinfo reads the mount table of a process (proc(5)
// /proc/PID/mountinfo): the one parser eaddr has of it.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Mount is the part of a mountinfo line eaddr needs.
type Mount struct {
	Root       string // field 4: root of the mount within the filesystem
	MountPoint string // field 5: mount point relative to the process root
	FSType     string // first field after the " - " separator
}

// Self reads the calling process's mount table.
func Self() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse parses mountinfo lines. Octal escapes (\040 for space etc.) in the
// root and mount point are decoded.
func Parse(rd io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		sep := -1
		// Optional fields start at index 6; the separator is a lone "-".
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 0 || sep+1 >= len(fields) {
			return nil, fmt.Errorf("malformed mountinfo line %q", line)
		}
		out = append(out, Mount{
			Root:       Unescape(fields[3]),
			MountPoint: Unescape(fields[4]),
			FSType:     fields[sep+1],
		})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Unescape decodes the \NNN octal escapes the kernel uses in mountinfo for
// space, tab, newline and backslash.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
