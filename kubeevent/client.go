// Package kubeevent reports a pod's failures as Kubernetes Events
// (events.k8s.io/v1) on the failing Pod, so that `kubectl describe pod` and
// `kubectl get events` show them. It is the last stage of a failure's path,
// beside the JSON output: Reporter.Report never blocks the trace; a worker
// aggregates the failures per pod, reason and destination and talks to the
// API server within a per-node budget of calls.
package kubeevent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Client calls the API server's events.k8s.io/v1 endpoints with a bearer
// token (re-read from its file before each call: bound service account
// tokens rotate) or a client certificate.
type Client struct {
	Server    string // https://host:port
	HTTP      *http.Client
	token     string
	tokenFile string
}

// callLimit bounds one API call.
const callLimit = 5 * time.Second

// saDir is where a pod's service account token and CA are mounted (a
// variable for tests).
var saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// InCluster configures a Client from the pod's service account, as every
// in-cluster client does: KUBERNETES_SERVICE_HOST/PORT, the token and CA
// mounted under /var/run/secrets/kubernetes.io/serviceaccount.
func InCluster() (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a pod: KUBERNETES_SERVICE_HOST/PORT are not set (use --kubeconfig)")
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("the service account's CA: %w (does the pod mount a token? kubectl apply -k deploy/kube-events mounts it)", err)
	}
	tlsc, err := tlsConfig(ca, false)
	if err != nil {
		return nil, err
	}
	c := &Client{Server: "https://" + net.JoinHostPort(host, port), HTTP: httpClient(tlsc), tokenFile: filepath.Join(saDir, "token")}
	if _, err := c.bearer(); err != nil {
		return nil, err
	}
	return c, nil
}

// kubeconfig is the part of a kubeconfig file eaddr reads.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Clusters []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData string `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token                 string `json:"token"`
			TokenFile             string `json:"tokenFile"`
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData string `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         string `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
}

// FromKubeconfig configures a Client from a kubeconfig file's current
// context: server, CA (file or data, or insecure-skip-tls-verify), and a
// token (or token file) or a client certificate. Exec and auth-provider
// plugins are not supported: the error says so.
func FromKubeconfig(path string) (*Client, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	var cluster, user string
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			cluster, user = c.Context.Cluster, c.Context.User
		}
	}
	if cluster == "" {
		return nil, fmt.Errorf("kubeconfig %s: no current-context %q", path, kc.CurrentContext)
	}
	c, err := kc.cluster(path, cluster)
	if err != nil {
		return nil, err
	}
	if err := kc.user(c, path, user); err != nil {
		return nil, err
	}
	return c, nil
}

// relTo resolves a kubeconfig's relative file name against its directory.
func relTo(kubeconfigPath, p string) string {
	if p != "" && !filepath.IsAbs(p) {
		return filepath.Join(filepath.Dir(kubeconfigPath), p)
	}
	return p
}

func (kc *kubeconfig) cluster(path, name string) (*Client, error) {
	for _, cl := range kc.Clusters {
		if cl.Name != name || cl.Cluster.Server == "" {
			continue
		}
		ca, err := fileOrData(relTo(path, cl.Cluster.CertificateAuthority), cl.Cluster.CertificateAuthorityData)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: cluster %s: CA: %w", path, name, err)
		}
		tlsc, err := tlsConfig(ca, cl.Cluster.InsecureSkipTLSVerify)
		if err != nil {
			return nil, err
		}
		return &Client{Server: strings.TrimRight(cl.Cluster.Server, "/"), HTTP: httpClient(tlsc)}, nil
	}
	return nil, fmt.Errorf("kubeconfig %s: no cluster %q with a server", path, name)
}

func (kc *kubeconfig) user(c *Client, path, name string) error {
	tlsc := c.HTTP.Transport.(*http.Transport).TLSClientConfig
	for _, u := range kc.Users {
		if u.Name != name {
			continue
		}
		c.token, c.tokenFile = u.User.Token, relTo(path, u.User.TokenFile)
		certPEM, err1 := fileOrData(relTo(path, u.User.ClientCertificate), u.User.ClientCertificateData)
		keyPEM, err2 := fileOrData(relTo(path, u.User.ClientKey), u.User.ClientKeyData)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("kubeconfig %s: user %s: %w", path, name, err)
		}
		if certPEM != nil {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return fmt.Errorf("kubeconfig %s: user %s: %w", path, name, err)
			}
			tlsc.Certificates = []tls.Certificate{cert}
		}
	}
	if c.token == "" && c.tokenFile == "" && len(tlsc.Certificates) == 0 {
		return fmt.Errorf("kubeconfig %s: user %q has no token, token file or client certificate (exec and auth-provider plugins are not supported)", path, name)
	}
	return nil
}

func fileOrData(file, data string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file != "" {
		return os.ReadFile(file)
	}
	return nil, nil
}

func tlsConfig(caPEM []byte, insecure bool) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("the CA holds no PEM certificate")
		}
		c.RootCAs = pool
	}
	return c, nil
}

func httpClient(tlsc *tls.Config) *http.Client {
	return &http.Client{Timeout: callLimit, Transport: &http.Transport{
		TLSClientConfig: tlsc, Proxy: http.ProxyFromEnvironment,
		DialContext:  (&net.Dialer{Timeout: callLimit}).DialContext,
		MaxIdleConns: 2, IdleConnTimeout: time.Minute, TLSHandshakeTimeout: callLimit,
	}}
}

func (c *Client) bearer() (string, error) {
	if c.tokenFile == "" {
		return c.token, nil
	}
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("the token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// APIError is an answer of the API server other than success.
type APIError struct {
	Status int
	Body   string
}

func (e *APIError) Error() string { return fmt.Sprintf("API server: %d %s", e.Status, e.Body) }

// do sends one request and decodes a JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "eaddr")
	tok, err := c.bearer()
	if err != nil {
		return err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return &APIError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
