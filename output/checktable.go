package output

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/internal/termtext"
)

// WriteCheckTable writes the report for a person (CheckLines).
func WriteCheckTable(w io.Writer, rep *diagnose.CheckReport, width int) error {
	_, err := io.WriteString(w, strings.Join(CheckLines(rep, width), "\n")+"\n")
	return err
}

// checkColumns is the header row of check's table: what each netns's
// numbers count (docs/check.md).
var checkColumns = []string{"NETNS", "STATUS", "RANGE", "RESERVED", "USABLE", "IN-USE", "HELD-FOR-ALL"}

// CheckLines is the report as lines of at most width columns, every
// workload's text made safe: a row per netns under a header row; under a
// netns, how to look inside it when it has a warning, its destinations
// (under their own header row) with the holders and fix of each warned
// one, and its findings; the worst status last.
func CheckLines(rep *diagnose.CheckReport, width int) []string {
	rows := [][]string{checkColumns}
	for i := range rep.NetNS {
		rows = append(rows, netnsCells(&rep.NetNS[i]))
	}
	table := Columns(rows, width, 0, 16)
	out := []string{table[0]}
	for i := range rep.NetNS {
		out = append(out, table[i+1])
		out = append(out, netnsDetails(&rep.NetNS[i], width)...)
	}
	return append(out, "worst: "+strings.ToUpper(rep.Worst.String()))
}

func netnsCells(r *diagnose.NetNSReport) []string {
	status := strings.ToUpper(r.Worst.String())
	if r.PortRange == "" {
		return []string{NetNSName(r), status}
	}
	res := r.Reserved
	if res == "" {
		res = "-"
	}
	return []string{NetNSName(r), status, r.PortRange, termtext.Fit(res, 24), strconv.Itoa(r.Usable), strconv.Itoa(r.InUse), strconv.Itoa(r.HeldForAll)}
}

// NetNSName names a netns for a person (check's and top's tables): its
// pod (namespace/name), "host", "netns NAME" for one mounted by ip netns
// (else the mount's path), or netns:INODE with the name of a process in it.
// Raw: a renderer makes it safe.
func NetNSName(r *diagnose.NetNSReport) string {
	switch {
	case r.Pod != nil && r.Pod.Name != "":
		return r.Pod.Namespace + "/" + r.Pod.Name
	case r.Host:
		return "host"
	case r.Mount != "":
		return "netns " + mountName(r.Mount)
	case r.Comm != "":
		return "netns:" + strconv.FormatUint(r.Inode, 10) + " (" + r.Comm + ")"
	}
	return "netns:" + strconv.FormatUint(r.Inode, 10)
}

// mountName is ip netns's name for a mount under /run/netns, else the path.
func mountName(mount string) string {
	if path.Dir(mount) == netdiag.RunNetNS {
		return path.Base(mount)
	}
	return mount
}

// netnsDetails: the lines under a netns's row.
func netnsDetails(r *diagnose.NetNSReport, width int) []string {
	var out []string
	if r.Worst >= diagnose.SevWarning && !r.Host && r.Error == "" {
		out = append(out, enteredLines(r, width)...)
	}
	out = append(out, destinationLines(r.Destinations, width)...)
	for _, f := range r.Findings {
		out = append(out, Hanging(fmt.Sprintf("  %-8s  ", strings.ToUpper(f.Severity.String())), f.Message, width)...)
	}
	return out
}

// enteredLines: which netns it is, how the audit entered it (through a
// process in it, any process: none of the holders by that; with none,
// through its mount), and how to look inside it.
func enteredLines(r *diagnose.NetNSReport, width int) []string {
	ino := strconv.FormatUint(r.Inode, 10)
	var what, look string
	if r.PID > 0 {
		what = fmt.Sprintf("netns %s, entered through pid %d (%s)", ino, r.PID, r.Comm)
		look = fmt.Sprintf("nsenter -t %d -n ss -tanp", r.PID)
	} else {
		what = fmt.Sprintf("netns %s, no process in it: entered through %s", ino, r.Mount)
		look = "nsenter --net=" + r.Mount + " ss -tanp"
	}
	if path.Dir(r.Mount) == netdiag.RunNetNS { // its name outlives any process in it
		look = "ip netns exec " + path.Base(r.Mount) + " ss -tanp"
	}
	return append(Hanging("  ", what, width), Hanging("  its sockets: ", look, width)...)
}

// destinationColumns is the header row of a netns's destinations: TAKEN
// is TOWARD-DEST + HELD-FOR-ALL, % is TAKEN of TRIED.
var destinationColumns = []string{"DESTINATION", "TOWARD-DEST", "HELD-FOR-ALL", "TAKEN", "TRIED", "%", ""}

// destinationLines: the destinations under their header row, each warned
// one followed by its holders and fix.
func destinationLines(ds []diagnose.Destination, width int) []string {
	if len(ds) == 0 {
		return nil
	}
	rows := [][]string{destinationColumns}
	for _, d := range ds {
		rows = append(rows, []string{d.Remote, strconv.Itoa(d.Toward), strconv.Itoa(d.HeldForAll), strconv.Itoa(d.Ports),
			strconv.Itoa(d.Tried), strconv.Itoa(d.Percent) + "%", destNote(d)})
	}
	table := Columns(rows, width-2, 0, 21)
	out := []string{"  " + table[0]}
	for i := range ds {
		out = append(out, "  "+table[i+1])
		if ds[i].Looked() {
			out = append(out, CulpritLines(&ds[i].Culprit, "    ", width)...)
		}
	}
	return out
}

// destNote: what the table adds to a destination's count.
func destNote(d diagnose.Destination) string {
	switch {
	case d.Exhausted:
		return "exhausted"
	case d.Unsure > 0:
		return fmt.Sprintf("(+%d unsure)", d.Unsure)
	}
	return ""
}
