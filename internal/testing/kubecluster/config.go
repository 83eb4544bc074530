package kubecluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// containerdConfig is containerd's config.toml: its own root and state below
// the cluster's directory, CRI on c.CRISocket, runc with the cgroupfs driver,
// the native snapshotter (overlayfs is not usable everywhere the tests run),
// the CNI network of cniConfig, and the busybox image as the sandbox image.
// restrict_oom_score_adj: without CAP_SYS_RESOURCE runc cannot lower
// oom_score_adj, which the kubelet asks for its pods.
func (c *Cluster) containerdConfig() string {
	return critest.ContainerdConfig(filepath.Join(c.Dir, "containerd", "root"), filepath.Join(c.Dir, "containerd", "state"),
		c.CRISocket, c.cniConfDir())
}

func (c *Cluster) cniConfDir() string { return filepath.Join(c.Dir, "cni", "net.d") }

// cniConfig is the pod network: the bridge plugin on c.podBridge with the
// gateway address (so that pods reach the node and, through kube-proxy's DNAT,
// Services), host-local IPAM on c.PodSubnet. Pods get routes to the Service
// range and to the node IP only, no default route, and no masquerading: nothing
// a pod sends leaves the machine.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": %q}, {"dst": %q}],
        "dataDir": %q
      }
    }
  ]
}
`, cniNetwork(c.Dir), c.podBridge, c.PodSubnet, c.podGateway, kubetest.ServiceCIDR, c.NodeIP+"/32",
		filepath.Join(c.Dir, "cni", "ipam"))
}

// kubeletConfig is the KubeletConfiguration; see the package documentation
// for why each setting is what it is.
func (c *Cluster) kubeletConfig(port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %q
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: %q
cgroupDriver: cgroupfs
cgroupRoot: %q
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
podLogsDir: %q
volumePluginDir: %q
clusterDomain: cluster.local
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "1Mi", "nodefs.available": "1Mi", "imagefs.available": "1Mi", "nodefs.inodesFree": "1"}
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
`, c.NodeIP, port, healthzPort, filepath.Join(c.Dir, "pki", "ca.crt"), "unix://"+c.CRISocket,
		CgroupRoot, c.PodLogsDir, filepath.Join(c.Dir, "kubelet", "volume-plugins"))
}

// kubeProxyConfig runs kube-proxy in iptables mode. Its conntrack settings
// are 0 so that it leaves the host's conntrack sysctls alone;
// localhostNodePorts false leaves route_localnet alone; NodePorts answer on
// the node IP only, never on the machine's real interfaces.
func (c *Cluster) kubeProxyConfig(kubeconfig string, healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
hostnameOverride: %q
clusterCIDR: %q
healthzBindAddress: "127.0.0.1:%d"
metricsBindAddress: "127.0.0.1:%d"
nodePortAddresses: [%q]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  tcpBeLiberal: false
  udpTimeout: 0s
  udpStreamTimeout: 0s
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 10s
  minSyncPeriod: 0s
`, kubeconfig, c.NodeName, c.PodSubnet, healthzPort, metricsPort, c.NodeIP+"/32")
}

// writeKubeconfig writes a kubeconfig for the API server with a bearer token.
func writeKubeconfig(path string, s *kubetest.Server, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: eaddr
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: user
  user: {token: %q}
contexts:
- name: eaddr
  context: {cluster: eaddr, user: user}
current-context: eaddr
`, s.URL, base64.StdEncoding.EncodeToString(s.CAPEM), token)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// writePKI writes a CA the kubelet trusts for client certificates
// (pki/ca.crt) and the API server's client certificate from it
// (pki/apiserver-kubelet-client.{crt,key}, group system:masters), so that
// kubectl exec, logs and port-forward reach the kubelet.
func writePKI(dir string) (cert, key string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "eaddr-kubecluster-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	ca, _ := x509.ParseCertificate(caDER)
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject:   pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &clientKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, "apiserver-kubelet-client.crt"), filepath.Join(dir, "apiserver-kubelet-client.key")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{filepath.Join(dir, "ca.crt"), "CERTIFICATE", caDER}, {cert, "CERTIFICATE", der}, {key, "EC PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return "", "", err
		}
	}
	return cert, key, nil
}
