package explain

// The commands `eaddr explain` gives to confirm a cause: the catalog's
// checks, filled only with what the pasted text carries. An address or port
// the text does not carry is never made up: a check toward the destination
// filters on what the text gives (ip:port, the ip alone, the port alone) or,
// with nothing, counts the sockets per destination so that the busiest one
// shows.

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// Command is one command that confirms a cause.
type Command struct {
	// Prefix runs Run where it must: NetnsPrefix, DebugPrefix, or "".
	Prefix string
	Run    string
	Why    string // what it shows
}

// NetnsPrefix runs a command in the network namespace of the process PID.
const NetnsPrefix = "nsenter -t PID -n"

// DebugPrefix runs eaddr (the image's /eaddr) in a node debug pod: the
// command README.md and docs/kubernetes.md give, which deploy's
// TestDebugCommand runs with the real kubectl.
const DebugPrefix = "kubectl debug node/NODE -it --profile=sysadmin --image=localhost/eaddr:TAG --image-pull-policy=Never --"

// Placeholder is a word in capitals in a Command that the operator fills.
type Placeholder struct{ Name, Means string }

// placeholders are the words a Command may hold, in the order they are
// explained.
var placeholders = []Placeholder{
	{"PID", "a process of the failing pod (or the failing process), as its node sees it; eaddr trace names it"},
	{"NETNS", "the inode of that network namespace: stat -L -c %i /proc/PID/ns/net"},
	{"NODE", "the pod's node (kubectl get pod -o wide shows it)"},
	{"TAG", "the tag of the eaddr image on the node, as make image printed it"},
	{"NAMESPACE", "the pod's namespace"},
	{"POD", "the pod's name"},
	{"IP", "the address of the failing call (the text does not carry it)"},
	{"PORT", "the port the command is about (the text does not carry it)"},
	{"PATH", "the unix socket's path, as the program names it"},
	{"NAME", "the Service's name"},
}

var placeholderWord = func() map[string]*regexp.Regexp {
	m := map[string]*regexp.Regexp{}
	for _, p := range placeholders {
		m[p.Name] = regexp.MustCompile(`(^|[^A-Za-z0-9_])` + p.Name + `($|[^A-Za-z0-9_])`)
	}
	return m
}()

// confirm fills checks with what id carries; the placeholders are those
// the commands hold.
func confirm(checks []Check, id *Identification, sys decode.Syscall) ([]Command, []Placeholder) {
	f := filler{id: id, sys: sys}
	var out []Command
	eaddrSeen := false
	for _, ch := range checks {
		cmd := Command{Run: f.fill(ch.Run), Why: f.fill(ch.Why)}
		switch ch.In {
		case checkInNetns:
			cmd.Prefix = NetnsPrefix
		case checkInEaddr:
			cmd.Prefix, cmd.Run = DebugPrefix, "/eaddr "+cmd.Run
			eaddrSeen = true
		}
		out = append(out, cmd)
	}
	if !eaddrSeen {
		// Every failure eaddr traces can be watched as it happens.
		out = append(out, Command{Prefix: DebugPrefix,
			Run: "/eaddr " + f.fill("trace --errno {errno} --cri-endpoint /host/run/containerd/containerd.sock --namespace NAMESPACE --pod POD"),
			Why: "the pod's next failures as they happen, with the process"})
	}
	var used []Placeholder
	for _, p := range placeholders {
		for _, c := range out {
			re := placeholderWord[p.Name]
			if re.MatchString(c.Prefix) || re.MatchString(c.Run) || re.MatchString(c.Why) {
				used = append(used, p)
				break
			}
		}
	}
	return out, used
}

// filler fills a check's {names} from one identification.
type filler struct {
	id  *Identification
	sys decode.Syscall
}

func (f filler) fill(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		j := strings.IndexByte(s[max(i, 0):], '}')
		if i < 0 || j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(f.value(s[i+1 : i+j]))
		s = s[i+j+1:]
	}
}

// value is one {name}: from the text, else the placeholder in capitals.
func (f filler) value(name string) string {
	ip, port := f.id.IP, f.id.Port
	switch name {
	case "ip":
		if ip.IsValid() {
			return ip.String()
		}
		return "IP"
	case "port":
		if port != 0 {
			return strconv.Itoa(int(port))
		}
		return "PORT"
	case "errno":
		if f.id.Errno == 0 {
			return "all"
		}
		return decode.ErrnoName(f.id.Errno)
	case "ss_dst":
		return ssDst(ip, port)
	case "dst":
		switch {
		case ip.IsValid() && port != 0:
			return netip.AddrPortFrom(ip, port).String()
		case ip.IsValid():
			return ip.String() + " (any port)"
		case port != 0:
			return "port " + strconv.Itoa(int(port))
		}
		return "each destination"
	}
	return "{" + name + "}" // not a name of ours: awk's {print $1}
}

// ssDst is ss's filter for the destination the text carries, with a
// leading space; "" when it carries none (ss then lists every socket).
func ssDst(ip netip.Addr, port uint16) string {
	switch {
	case ip.IsValid() && port != 0:
		return " dst " + netip.AddrPortFrom(ip, port).String()
	case ip.Is6():
		return " dst [" + ip.String() + "]" // ss reads a bare IPv6 address's last group as a port
	case ip.IsValid():
		return " dst " + ip.String()
	case port != 0:
		return " dport = :" + strconv.Itoa(int(port))
	}
	return ""
}
