// Package kubetest starts a real Kubernetes API server for a test: Debian's
// etcd and a kube-apiserver built from the Go module proxy (Version, cached in
// CacheDir), both on 127.0.0.1 with free ports and their data in t.TempDir(),
// both stopped by t.Cleanup even when the test fails.
//
// The server authenticates an admin token (group system:masters) from a token
// file and ServiceAccount tokens, authorises with RBAC, allows privileged
// containers (as real clusters do), and runs the default admission plugins
// (PodSecurity among them). Nothing else of a cluster runs:
// no controller manager, scheduler or kubelet, so a DaemonSet is stored but no
// pod is ever made from it.
//
// Server.Kubectl (and NewKubectl, without a server) runs the real kubectl of
// Version, built the same way into the same cache (Commands, Binary).
package kubetest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/buildcache"
	"github.com/eaddr/eaddr/internal/testing/child"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// ReadyTimeout bounds how long Start waits for etcd's /health and then for
// the API server's /readyz.
const ReadyTimeout = 60 * time.Second

// Options change how the API server is started. The zero value is a server
// with kube-apiserver's defaults for everything not listed in Start.
type Options struct {
	// PodSecurityDefaultEnforce, when set ("baseline", "restricted"), is the
	// Pod Security level enforced in namespaces without a
	// pod-security.kubernetes.io/enforce label (an AdmissionConfiguration, as
	// a cluster administrator would set). Unset, it is kube-apiserver's
	// default: privileged, i.e. nothing is enforced without a label.
	PodSecurityDefaultEnforce string

	// Address, when set, is the IP address the API server binds, advertises
	// and is reached at (URL), instead of 127.0.0.1. A non-loopback address
	// also lets the API server keep the "kubernetes" Service's endpoints (the
	// default lease reconciler), so that pods reach it through the Service.
	Address string

	// Users are more users of the token file, beside "admin": each gets a
	// token of its own (Server.Tokens).
	Users []User

	// AuthorizationMode is --authorization-mode; RBAC when empty.
	AuthorizationMode string

	// ExtraArgs are appended to kube-apiserver's command line. A flag that
	// takes one value overrides the one Start sets; a list flag adds to it.
	ExtraArgs []string
}

// User is one user of the API server's token file.
type User struct {
	Name   string   // e.g. system:node:NODE
	Groups []string // e.g. system:nodes
}

// Server is a running API server.
type Server struct {
	URL     string       // https://127.0.0.1:PORT
	Token   string       // bearer token of user "admin", group system:masters
	CAPEM   []byte       // PEM of the self-signed serving certificate and its CA (cert-dir/apiserver.crt)
	Client  *http.Client // trusts CAPEM; sends no credentials of its own (Do adds them)
	Dir     string       // the test's directory: certs, keys, etcd data, logs
	EtcdURL string       // http://127.0.0.1:PORT
	// Tokens are the bearer tokens of Options.Users, by name.
	Tokens map[string]string
	// CertFile is the self-signed serving certificate and its CA (the file
	// CAPEM was read from).
	CertFile string

	t          testing.TB
	etcd, kube *child.Process
	stopOnce   sync.Once
}

// Start starts etcd and kube-apiserver for t and returns once /readyz answers
// ok; Stop is registered with t.Cleanup. It skips (testenv.Skip) when not
// root or when etcd (Debian's etcd-server) is not installed, and builds the
// kube-apiserver binary first if it is not cached (APIServerBinary).
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with Options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	testenv.RequireRoot(t)
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/etcd"); serr != nil {
			testenv.Missing(t, "etcd", "etcd-server")
		}
		etcdBin = "/usr/bin/etcd"
	}
	apiserverBin := APIServerBinary(t)

	s := &Server{t: t, Dir: t.TempDir()}
	t.Cleanup(s.Stop)
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1"
	if opts.Address != "" {
		addr = opts.Address
	}
	s.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	s.URL = "https://" + net.JoinHostPort(addr, strconv.Itoa(ports[2]))
	s.startEtcd(etcdBin, "http://127.0.0.1:"+strconv.Itoa(ports[1]))
	s.startAPIServer(apiserverBin, ports[2], opts)
	return s
}

// startEtcd starts etcd on s.EtcdURL and waits until it is healthy.
func (s *Server) startEtcd(bin, peerURL string) {
	t := s.t
	// etcd creates its data dir with mode 0700 (3.4 refuses an existing one
	// with wider permissions, which t.TempDir's would be).
	var err error
	s.etcd, err = startProcess(filepath.Join(s.Dir, "etcd.log"), bin,
		"--name=kubetest",
		"--data-dir="+filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls="+s.EtcdURL,
		"--advertise-client-urls="+s.EtcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--initial-cluster-state=new",
		"--logger=zap", "--log-outputs=stderr")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.waitEtcd(); err != nil {
		t.Fatalf("etcd did not become healthy: %v\n%s", err, buildcache.Tail(s.etcd.LogPath, 40))
	}
}

// startAPIServer starts kube-apiserver on port with an admin token and a
// service account key, and waits until it is ready.
func (s *Server) startAPIServer(bin string, port int, opts Options) {
	t := s.t
	certDir := filepath.Join(s.Dir, "certs")
	saKey := filepath.Join(s.Dir, "sa.key")
	tokenFile := filepath.Join(s.Dir, "tokens.csv")
	if err := writeRSAKey(saKey); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, s.tokenFile(opts.Users), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1"
	if opts.Address != "" {
		addr = opts.Address
	}
	args := []string{
		"--etcd-servers=" + s.EtcdURL,
		"--bind-address=" + addr,
		"--advertise-address=" + addr,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir, // no --tls-cert-file: kube-apiserver writes a self-signed pair here
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=" + cmp.Or(opts.AuthorizationMode, "RBAC"),
		"--service-cluster-ip-range=" + ServiceCIDR,
		// As on kubeadm's, kind's and managed clusters: privileged containers
		// are allowed (kubectl debug node's sysadmin profile makes one);
		// whether a namespace admits them is Pod Security's decision.
		"--allow-privileged=true",
	}
	if ip := net.ParseIP(addr); ip == nil || ip.IsLoopback() {
		// No Endpoints for the "kubernetes" Service: they would hold the
		// advertise address, and loopback addresses are not valid endpoints.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if opts.PodSecurityDefaultEnforce != "" {
		path := filepath.Join(s.Dir, "admission.yaml")
		if err := os.WriteFile(path, admissionConfig(opts.PodSecurityDefaultEnforce), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--admission-control-config-file="+path)
	}
	args = append(args, opts.ExtraArgs...)
	var err error
	s.kube, err = startProcess(filepath.Join(s.Dir, "kube-apiserver.log"), bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	s.CertFile = filepath.Join(certDir, "apiserver.crt")
	if err := s.waitReady(s.CertFile); err != nil {
		t.Fatalf("kube-apiserver %s not ready: %v\nlast lines of %s:\n%s", Version, err, s.kube.LogPath, buildcache.Tail(s.kube.LogPath, 60))
	}
	t.Logf("kube-apiserver %s ready at %s after %s (etcd %s; logs in %s)", Version, s.URL, time.Since(begin).Round(100*time.Millisecond), s.EtcdURL, s.Dir)
}

// Stop stops kube-apiserver, then etcd (SIGTERM, SIGKILL after 10 s), and
// waits for both. When the test has failed it logs the last lines of both
// logs first. Safe to call more than once; t.Cleanup calls it too.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.t.Failed() {
			for _, p := range []*child.Process{s.kube, s.etcd} {
				if p != nil {
					s.t.Logf("last lines of %s:\n%s", p.LogPath, buildcache.Tail(p.LogPath, 40))
				}
			}
		}
		for _, p := range []*child.Process{s.kube, s.etcd} {
			if p != nil {
				killed, err := p.Stop(10 * time.Second)
				if killed {
					s.t.Logf("%s did not stop within 10 s of SIGTERM and was killed", p.Cmd.Path)
				}
				if err != nil {
					s.t.Errorf("stopping %s: %v", p.Cmd.Path, err)
				}
			}
		}
	})
}

// Pids are the process ids of kube-apiserver and etcd (0 if not started).
func (s *Server) Pids() (apiserver, etcd int) {
	if s.kube != nil {
		apiserver = s.kube.Cmd.Process.Pid
	}
	if s.etcd != nil {
		etcd = s.etcd.Cmd.Process.Pid
	}
	return
}

func (s *Server) waitEtcd() error {
	deadline := time.Now().Add(ReadyTimeout)
	var last error
	hc := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if s.etcd.Exited() {
			return fmt.Errorf("etcd exited: %v", s.etcd.Err())
		}
		resp, err := hc.Get(s.EtcdURL + "/health")
		if err == nil {
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && bytes.Contains(body.Bytes(), []byte(`"health":"true"`)) {
				return nil
			}
			err = fmt.Errorf("/health: %s: %s", resp.Status, body.String())
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no healthy answer within %s: %v", ReadyTimeout, last)
}

// waitReady waits for the self-signed certificate, then for /readyz to
// answer 200 over TLS verified against it.
func (s *Server) waitReady(certFile string) error {
	deadline := time.Now().Add(ReadyTimeout)
	var last error = errors.New("nothing tried")
	for time.Now().Before(deadline) {
		if s.kube.Exited() {
			return fmt.Errorf("kube-apiserver exited: %v", s.kube.Err())
		}
		if s.Client == nil {
			pem, err := os.ReadFile(certFile)
			if err != nil {
				last = err
				time.Sleep(200 * time.Millisecond)
				continue
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				last = fmt.Errorf("%s: no certificate in it (yet)", certFile)
				time.Sleep(200 * time.Millisecond)
				continue
			}
			s.CAPEM = pem
			s.Client = &http.Client{
				Timeout:   30 * time.Second,
				Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := s.Do(ctx, Request{Method: "GET", Path: "/readyz"})
		cancel()
		if err == nil && resp.Status == 200 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("/readyz: %d: %s", resp.Status, resp.Body)
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %s: %v", ReadyTimeout, last)
}

func admissionConfig(level string) []byte {
	return []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: PodSecurity
    configuration:
      apiVersion: pod-security.admission.config.k8s.io/v1
      kind: PodSecurityConfiguration
      defaults:
        enforce: ` + strconv.Quote(level) + `
        enforce-version: latest
        audit: privileged
        audit-version: latest
        warn: privileged
        warn-version: latest
      exemptions: {}
`)
}

// startProcess starts bin as a child (child.Start), its log at logPath.
func startProcess(logPath, bin string, args ...string) (*child.Process, error) {
	return child.Start(filepath.Base(bin), logPath, exec.Command(bin, args...))
}

// ServiceCIDR is the API server's --service-cluster-ip-range; the
// "kubernetes" Service has its first address, 10.96.0.1.
const ServiceCIDR = "10.96.0.0/12"

// tokenFile is the --token-auth-file: the admin (s.Token) and users, each
// with a new random token (s.Tokens).
func (s *Server) tokenFile(users []User) []byte {
	s.Token = randomToken()
	s.Tokens = map[string]string{}
	// token,user,uid,"group,group"
	b := []byte(s.Token + ",admin,kubetest-admin,\"system:masters\"\n")
	for _, u := range users {
		tok := randomToken()
		s.Tokens[u.Name] = tok
		b = fmt.Appendf(b, "%s,%s,%s,%q\n", tok, u.Name, "kubetest-"+u.Name, strings.Join(u.Groups, ","))
	}
	return b
}

// FreePorts asks the kernel for n free loopback ports, holding each until all
// are known so that they differ.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}
