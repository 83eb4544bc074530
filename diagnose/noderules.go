package diagnose

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/nodeport"
)

// HostRules is the node's NodePort rules (kube-proxy's IPVS, nftables or
// iptables-nft), read in the host netns through pid 1 at most once per
// Every; it implements NodePortRules. Like the Diagnoser it serves, it is
// not safe for concurrent use.
type HostRules struct {
	Inode uint64        // the host netns
	Every time.Duration // how long one read is used
	table *nodeport.Table
	err   error
	at    time.Time
	now   func() time.Time
}

// NewHostRules reads the rules of the netns with inode host.
func NewHostRules(host uint64) *HostRules {
	return &HostRules{Inode: host, Every: 10 * time.Second, now: time.Now}
}

// Find names the rule that catches proto traffic to port: its Service
// when kube-proxy wrote it down, else its mode and what it matches.
func (h *HostRules) Find(proto uint8, addr netip.Addr, port uint16) (string, bool) {
	if now := h.now(); h.at.IsZero() || now.Sub(h.at) >= h.Every {
		h.table, h.err = h.read()
		h.at = now
	}
	if h.table == nil {
		return "", false
	}
	hit, ok := h.table.Find(proto, port)
	if addr.IsValid() && !addr.IsUnspecified() {
		hit, ok = h.table.FindAddr(proto, addr, port)
	}
	if !ok {
		return "", false
	}
	return hitWords(hit), true
}

// Err is why the last read found nothing, nil when it read rules. Reading
// nftables and IPVS needs CAP_NET_ADMIN, which the DaemonSet does not add
// (docs/kubernetes.md): there this says so.
func (h *HostRules) Err() error { return h.err }

func (h *HostRules) read() (*nodeport.Table, error) {
	ns, err := netdiag.OpenNetns(h.Inode, 1)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	var t *nodeport.Table
	err = ns.Do(func() error {
		var err error
		t, err = nodeport.Read()
		return err
	})
	return t, err
}

func hitWords(h nodeport.Hit) string {
	what := "Service " + h.Service
	if h.Service == "" {
		what = "a rule that names no Service" // IPVS carries no names; a shortened nftables chain neither
	}
	switch {
	case h.Addr.IsValid() && h.Backend != "":
		return fmt.Sprintf("%s (%s virtual service %s:%d, backend %s)", what, h.Mode, h.Addr, h.Port, h.Backend)
	case h.Addr.IsValid():
		return fmt.Sprintf("%s (%s virtual service %s:%d)", what, h.Mode, h.Addr, h.Port)
	case h.Verdict != "":
		return fmt.Sprintf("%s (%s rule: %s)", what, h.Mode, h.Verdict)
	}
	return fmt.Sprintf("%s (%s)", what, h.Mode)
}
