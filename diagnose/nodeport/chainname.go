package nodeport

import "strings"

// serviceFromChain names the Service port of one of kube-proxy's nftables
// per-service chains: "external-ULMVA6XW-default/web/tcp/http" (prefix,
// 8-character hash, namespace/name/protocol/port, servicePortChainNameBase
// in pkg/proxy/nftables/proxier.go) is "default/web:http", and with an
// unnamed port ("default/web/tcp/") "default/web", as kube-proxy's
// ServicePortName.String writes it. Any other chain name, or one kube-proxy
// truncated ("..."), gives "": the name is not guessed.
func serviceFromChain(chain string) string {
	i := strings.IndexByte(chain, '-')
	if i < 0 {
		return ""
	}
	switch chain[:i] {
	case "external", "service", "local":
	default:
		return ""
	}
	rest := chain[i+1:]
	if len(rest) < 10 || rest[8] != '-' || strings.HasSuffix(rest, "...") {
		return ""
	}
	parts := strings.Split(rest[9:], "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	switch parts[2] {
	case "tcp", "udp", "sctp":
	default:
		return ""
	}
	if parts[3] == "" {
		return parts[0] + "/" + parts[1]
	}
	return parts[0] + "/" + parts[1] + ":" + parts[3]
}
