package nodeport

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// The CNI portmap plugin's hostPorts, as iptables-nft writes them: table
// nat, one chain per container, CNI-DN-<hash>, whose rules DNAT one
// protocol and destination port each to the pod,
//
//	-A CNI-DN-xxx -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.5:80
//
// read with the KUBE-NODEPORTS rules' matcher (iptnft.go).
const cniDNATPrefix = "CNI-DN-"

// HostPort is one hostPort a CNI portmap rule forwards to a pod.
type HostPort struct {
	Proto uint8
	Port  uint16
	Chain string
}

// ReadHostPorts reads the portmap rules of table nat, families ip and
// ip6, in the calling thread's netns; skipped counts rules of such chains
// that are not one protocol and port (never guessed).
func ReadHostPorts() (ports []HostPort, skipped int, err error) {
	c, err := dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, 0, err
	}
	defer c.close()
	for _, fam := range families {
		req := putString(nil, unix.NFTA_RULE_TABLE, iptNatTable)
		err := nftRequest(c, unix.NFT_MSG_GETRULE, fam, unix.NLM_F_DUMP, req, func(b []byte) error {
			r, err := parseRule(b)
			switch {
			case err != nil:
				return err
			case r.table != iptNatTable || !strings.HasPrefix(r.chain, cniDNATPrefix):
			case r.ok:
				ports = append(ports, HostPort{Proto: r.hit.Proto, Port: r.hit.Port, Chain: r.chain})
			default:
				skipped++
			}
			return nil
		})
		if errors.Is(err, unix.ENOENT) {
			continue // no table nat in this family
		}
		if err != nil {
			return nil, 0, fmt.Errorf("table %s %s: %w", famName(fam), iptNatTable, err)
		}
	}
	return ports, skipped, nil
}
