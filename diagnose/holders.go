package diagnose

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/pod/kube"
)

// holders finds the processes that hold the socket inodes (each inode with
// the number of counted sockets it stands for), within HoldersWait; the
// three with the most sockets.
func (d *Diagnoser) holders(ns *netdiag.Netns, perInode map[uint64]int) []Holder {
	if len(perInode) == 0 {
		return nil
	}
	inodes := make(map[uint64]bool, len(perInode))
	for ino := range perInode {
		inodes[ino] = true
	}
	byPID := map[int]*Holder{}
	for inode, procs := range ns.Holders(inodes, d.HoldersWait) {
		for _, p := range procs {
			h := byPID[p.PID]
			if h == nil {
				h = &Holder{PID: p.PID, Comm: p.Comm}
				byPID[p.PID] = h
			}
			h.Sockets += perInode[inode]
		}
	}
	out := make([]Holder, 0, len(byPID))
	for _, h := range byPID {
		h.PodUID, h.ContainerID = PodOfProcess(h.PID)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Sockets != out[j].Sockets {
			return out[i].Sockets > out[j].Sockets
		}
		return out[i].PID < out[j].PID
	})
	return out[:min(len(out), 3)]
}

// PodOfProcess is the pod and container of pid from its cgroup path (any
// hierarchy: on hybrid nodes the v1 controllers carry it), "" outside a pod
// or when the process has exited.
func PodOfProcess(pid int) (uid, container string) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		_, path, ok := cutLast(line)
		if !ok {
			continue
		}
		if p, ok := kube.ParseCgroupPath(path); ok {
			return p.UID, p.ContainerID
		}
	}
	return "", ""
}

// cutLast splits "ID:CONTROLLERS:PATH" at its second colon (a path may hold
// colons: containerd's systemd form on cgroup v1).
func cutLast(line string) (head, path string, ok bool) {
	i := strings.IndexByte(line, ':')
	if i < 0 {
		return "", "", false
	}
	j := strings.IndexByte(line[i+1:], ':')
	if j < 0 {
		return "", "", false
	}
	return line[:i+1+j], line[i+2+j:], true
}

// stateCounts counts socks[idx...] by TCP state.
func (p *portScene) stateCounts(idx []int) []Count {
	m := map[string]int{}
	seen := map[int]bool{}
	for _, i := range idx {
		if seen[i] {
			continue
		}
		seen[i] = true
		name := netdiag.StateName(p.socks[i].State)
		if p.socks[i].Proto == portmodel.UDP {
			name = udpStateName(p.socks[i].State)
		}
		m[name]++
	}
	return sortedCounts(m)
}

func udpStateName(s uint8) string {
	if s == netdiag.StateEstablished {
		return "UDP_CONNECTED"
	}
	return "UDP_BOUND"
}

// holderWords: ", held by pid 812 python3, pid 9 java", or why none is named.
func holderWords(g *Diagnosis) string {
	if len(g.Holders) == 0 {
		for _, c := range g.States {
			if c.State != "TIME_WAIT" && !strings.HasPrefix(c.State, "FIN_WAIT") && c.State != "LAST_ACK" && c.State != "CLOSING" {
				return ", no holder found: the processes exited, or could not be searched in time"
			}
		}
		return "; no process holds them: the kernel keeps closed connections until they time out"
	}
	return holdersString(g.Holders)
}

// spansString formats reserved spans as the sysctl does: "30000-32767,8080".
func spansString(spans []portmodel.Span) string {
	parts := make([]string, 0, len(spans))
	for _, s := range spans {
		if s.Lo == s.Hi {
			parts = append(parts, fmt.Sprint(s.Lo))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", s.Lo, s.Hi))
		}
	}
	return strings.Join(parts, ",")
}

// holdersString: ", held by pid 812 python3, pid 9 java"; "" for none.
func holdersString(h []Holder) string {
	if len(h) == 0 {
		return ""
	}
	parts := make([]string, 0, len(h))
	for _, x := range h {
		parts = append(parts, fmt.Sprintf("pid %d %s", x.PID, x.Comm))
	}
	return ", held by " + strings.Join(parts, ", ")
}
