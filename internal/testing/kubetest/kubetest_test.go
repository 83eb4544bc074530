package kubetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestWarningText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`299 - "unknown field \"spec.foo\""`, `unknown field "spec.foo"`},
		{`299 - "would violate PodSecurity \"baseline:latest\": host namespaces (hostPID=true)"`, `would violate PodSecurity "baseline:latest": host namespaces (hostPID=true)`},
		{`not a warn header`, `not a warn header`},
	} {
		if got := warningText(c.in); got != c.want {
			t.Errorf("warningText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestWrapperGoMod(t *testing.T) {
	upstream := `module k8s.io/kubernetes

go 1.24.0

godebug default=go1.24

require (
	k8s.io/api v0.0.0
	github.com/x/y v1.2.3
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/pod-security-admission => ./staging/src/k8s.io/pod-security-admission
	github.com/x/y => github.com/x/y v1.2.4
)
`
	got, err := wrapperGoMod([]byte(upstream), "v1.34.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\ngo 1.24.0\n", "\ngodebug default=go1.24\n", "\nrequire k8s.io/kubernetes v1.34.2\n",
		"\nreplace k8s.io/api => k8s.io/api v0.34.2\n",
		"\nreplace k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.34.2\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("wrapper go.mod lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "github.com/x/y") {
		t.Errorf("wrapper go.mod copies a replace that is not of a staging module:\n%s", got)
	}
	if _, err := wrapperGoMod([]byte("module k8s.io/kubernetes\n"), "v1.34.2"); err == nil {
		t.Error("no error for a go.mod without staging replaces")
	}
}

// do sends r and fails the test unless the answer has status want.
func do(t *testing.T, s *Server, r Request, want int) *Response {
	t.Helper()
	resp, err := s.Do(context.Background(), r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	if resp.Status != want {
		t.Fatalf("%s %s: HTTP %d, want %d: %s", r.Method, r.Path, resp.Status, want, resp.Body)
	}
	return resp
}

func post(t *testing.T, s *Server, path, body string) {
	t.Helper()
	do(t, s, Request{Method: "POST", Path: path, Body: []byte(body)}, http.StatusCreated)
}

func TestServer(t *testing.T) {
	s := Start(t)
	ctx := context.Background()

	var v struct{ GitVersion string }
	if err := json.Unmarshal(do(t, s, Request{Method: "GET", Path: "/version"}, 200).Body, &v); err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != Version {
		t.Errorf("/version gitVersion %q, want %q", v.GitVersion, Version)
	}

	// Authentication: a wrong token is nobody.
	do(t, s, Request{Method: "GET", Path: "/api/v1/namespaces", Token: "not-" + s.Token}, http.StatusUnauthorized)

	// Discovery.
	for _, c := range []struct{ apiVersion, kind, ns, want string }{
		{"v1", "Namespace", "x", "/api/v1/namespaces"},
		{"v1", "ServiceAccount", "x", "/api/v1/namespaces/x/serviceaccounts"},
		{"apps/v1", "DaemonSet", "x", "/apis/apps/v1/namespaces/x/daemonsets"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
	} {
		got, err := s.ResourcePath(ctx, c.apiVersion, c.kind, c.ns)
		if err != nil || got != c.want {
			t.Errorf("ResourcePath(%s, %s, %s) = %q, %v; want %q", c.apiVersion, c.kind, c.ns, got, err, c.want)
		}
	}
	for _, c := range [][2]string{{"monitoring.coreos.com/v1", "PrometheusRule"}, {"apps/v1", "Daemonset"}} {
		if _, err := s.ResourcePath(ctx, c[0], c[1], "x"); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("ResourcePath(%s, %s): %v, want ErrUnknownKind", c[0], c[1], err)
		}
	}

	// RBAC with a ServiceAccount token: nothing until a RoleBinding allows it.
	post(t, s, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rbac"}}`)
	post(t, s, "/api/v1/namespaces/rbac/serviceaccounts", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"reader"}}`)
	token := s.ServiceAccountToken(t, "rbac", "reader")
	list := Request{Method: "GET", Path: "/api/v1/namespaces/rbac/configmaps", Token: token}
	do(t, s, list, http.StatusForbidden)
	post(t, s, "/apis/rbac.authorization.k8s.io/v1/namespaces/rbac/roles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"read"},
		  "rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["list"]}]}`)
	post(t, s, "/apis/rbac.authorization.k8s.io/v1/namespaces/rbac/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"read"},
		  "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"read"},
		  "subjects":[{"kind":"ServiceAccount","name":"reader","namespace":"rbac"}]}`)
	deadline := time.Now().Add(10 * time.Second) // RBAC's informers see the binding shortly after
	for {
		resp, err := s.Do(ctx, list)
		if err == nil && resp.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ServiceAccount still cannot list configmaps 10 s after the RoleBinding: %v %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// kube-apiserver's default Pod Security level for an unlabelled namespace
	// is privileged: hostPID is admitted (TestPodSecurityDefaultEnforce).
	do(t, s, hostPIDPod("rbac", "reader", true), http.StatusCreated)
	// The same account may not list secrets.
	do(t, s, Request{Method: "GET", Path: "/api/v1/namespaces/rbac/secrets", Token: token}, http.StatusForbidden)

	// The kubeconfig: strictly the fields client-go reads, and what it says works
	// with a client that knows nothing but the file.
	data, err := os.ReadFile(s.WriteKubeconfig(t, token))
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeconfig
	if err := yaml.UnmarshalStrict(data, &kc); err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, data)
	}
	if kc.APIVersion != "v1" || kc.Kind != "Config" || len(kc.Clusters) != 1 || len(kc.Users) != 1 ||
		len(kc.Contexts) != 1 || kc.CurrentContext != kc.Contexts[0].Name ||
		kc.Contexts[0].Context.Cluster != kc.Clusters[0].Name || kc.Contexts[0].Context.User != kc.Users[0].Name {
		t.Fatalf("kubeconfig is not one consistent cluster/user/context:\n%s", data)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(kc.Clusters[0].Cluster.CertificateAuthorityData) {
		t.Fatalf("kubeconfig: no certificate in certificate-authority-data")
	}
	req, _ := http.NewRequest("GET", kc.Clusters[0].Cluster.Server+"/api/v1/namespaces/rbac/configmaps", nil)
	req.Header.Set("Authorization", "Bearer "+kc.Users[0].User.Token)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("with the kubeconfig's server, CA and token: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with the kubeconfig's server, CA and token: %s", resp.Status)
	}

	// Stop: both processes gone, the port closed.
	apiPid, etcdPid := s.Pids()
	s.Stop()
	for _, pid := range []int{apiPid, etcdPid} {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL, "https://"), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", s.URL)
	}
}

// kubeconfig is the part of client-go's clientcmd v1 Config that
// WriteKubeconfig writes (client-go is not a dependency of eaddr).
type kubeconfig struct {
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthorityData []byte `json:"certificate-authority-data"`
		} `json:"cluster"`
	} `json:"clusters"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token string `json:"token"`
		} `json:"user"`
	} `json:"users"`
}

// hostPIDPod is a dry-run creation of a Pod in namespace, run as its
// ServiceAccount account, with or without hostPID (outside Pod Security's
// baseline).
func hostPIDPod(namespace, account string, hostPID bool) Request {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{
			"hostPID":                      hostPID,
			"serviceAccountName":           account,
			"automountServiceAccountToken": false,
			"containers":                   []any{map[string]any{"name": "c", "image": "busybox"}},
		},
	})
	return Request{Method: "POST", Path: "/api/v1/namespaces/" + namespace + "/pods?dryRun=All", Body: b}
}

// A namespace without an enforce label gets the level of
// Options.PodSecurityDefaultEnforce (TestServer: with kube-apiserver's default
// it gets privileged).
func TestPodSecurityDefaultEnforce(t *testing.T) {
	s := StartWith(t, Options{PodSecurityDefaultEnforce: "baseline"})
	post(t, s, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"plain"}}`)
	// No controller manager makes "default": without it the ServiceAccount
	// admission plugin would reject the pod before Pod Security sees it.
	post(t, s, "/api/v1/namespaces/plain/serviceaccounts", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`)
	resp := do(t, s, hostPIDPod("plain", "default", true), http.StatusForbidden)
	if !strings.Contains(string(resp.Body), `violates PodSecurity \"baseline:latest\"`) {
		t.Errorf("rejected, but not by PodSecurity baseline: %s", resp.Body)
	}
	do(t, s, hostPIDPod("plain", "default", false), http.StatusCreated)
}

// The wrapper module's tools.go imports every one of Commands, so that its
// go.sum covers each; Build refuses a name that is not one of them.
func TestToolsGo(t *testing.T) {
	got := string(toolsGo([]string{"kube-apiserver", "kubectl"}))
	want := "//go:build tools\n\npackage tools\n\nimport (\n\t_ \"k8s.io/kubernetes/cmd/kube-apiserver\"\n\t_ \"k8s.io/kubernetes/cmd/kubectl\"\n)\n"
	if got != want {
		t.Errorf("toolsGo:\n%s\nwant:\n%s", got, want)
	}
	if _, err := Build(context.Background(), t.Logf, "kubelet-typo"); err == nil || !strings.Contains(err.Error(), "not one of kubetest.Commands") {
		t.Errorf("Build of an unknown command: %v", err)
	}
}

// The kubectl the tests run is Version's, from the cache, whatever kubectl
// is on PATH, and talks to the server of its kubeconfig only: a KUBECONFIG
// or HOME in the test's environment changes nothing.
func TestKubectl(t *testing.T) {
	s := Start(t)
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	t.Setenv("HOME", "/nonexistent")
	k := s.Kubectl(t)
	if k.Bin != BinaryPath("kubectl") {
		t.Errorf("kubectl %s, want the cached %s", k.Bin, BinaryPath("kubectl"))
	}
	out, _, err := k.Run(nil, "version", "--client", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.ClientVersion.GitVersion != Version {
		t.Errorf("kubectl version --client: %q (%v), want %s", out, err, Version)
	}
	out, stderr, err := k.Run(nil, "get", "namespace", "default", "-o", "jsonpath={.metadata.name}")
	if err != nil || string(out) != "default" || len(stderr) > 0 {
		t.Errorf("kubectl get namespace default: %q %q %v", out, stderr, err)
	}
	if _, _, err := k.Run(nil, "get", "namespace", "no-such-namespace"); err == nil || !strings.Contains(err.Error(), `"no-such-namespace" not found`) {
		t.Errorf("kubectl get of a missing namespace: %v, want its NotFound", err)
	}
}
