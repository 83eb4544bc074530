package kubetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Request is one call to the API server.
type Request struct {
	Method string // GET, POST, ...
	Path   string // e.g. /api/v1/namespaces?fieldValidation=Strict
	Body   []byte
	// ContentType of Body; application/json when empty. The API server also
	// takes application/yaml.
	ContentType string
	// Token is the bearer token; the admin's (Server.Token) when empty.
	Token string
}

// Response is the API server's answer.
type Response struct {
	Status int
	Body   []byte
	// Warnings are the texts of the Warning headers (RFC 7234 "299 - text"),
	// as kubectl prints them: deprecations, Pod Security warnings, unknown or
	// duplicate fields under fieldValidation=Warn.
	Warnings []string
}

// Err is nil for a 2xx answer, else an error with the status and the
// message of the metav1.Status the API server answered with.
func (r *Response) Err() error {
	if r.Status >= 200 && r.Status < 300 {
		return nil
	}
	var st metav1.Status
	if json.Unmarshal(r.Body, &st) == nil && st.Message != "" {
		return fmt.Errorf("HTTP %d %s: %s", r.Status, st.Reason, st.Message)
	}
	return fmt.Errorf("HTTP %d: %s", r.Status, bytes.TrimSpace(r.Body))
}

// Do sends r to the API server.
func (s *Server) Do(ctx context.Context, r Request) (*Response, error) {
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, s.URL+r.Path, body)
	if err != nil {
		return nil, err
	}
	token := r.Token
	if token == "" {
		token = s.Token
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if r.Body != nil {
		ct := r.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := &Response{Status: resp.StatusCode, Body: data}
	for _, h := range resp.Header.Values("Warning") {
		out.Warnings = append(out.Warnings, warningText(h))
	}
	return out, nil
}

// warningHeader is RFC 7234's warn-code SP warn-agent SP warn-text, the form
// the API server uses ("299 - \"text\"").
var warningHeader = regexp.MustCompile(`^\d{3} \S+ ("(?:[^"\\]|\\.)*")`)

// warningText returns the text of one Warning header value, or the value
// itself if it is not in the RFC 7234 form.
func warningText(h string) string {
	if m := warningHeader.FindStringSubmatch(h); m != nil {
		if s, err := strconv.Unquote(m[1]); err == nil {
			return s
		}
	}
	return h
}

// ErrUnknownKind is returned by ResourcePath for a kind the API server does
// not serve (a custom resource whose CRD is not installed, a typo).
var ErrUnknownKind = errors.New("kind not served by this API server")

// ResourcePath returns the collection path to create an object of kind in
// apiVersion (e.g. "apps/v1", "DaemonSet") in namespace, found through the API
// server's discovery: /apis/apps/v1/namespaces/NS/daemonsets. namespace is
// ignored for cluster-scoped kinds and required for namespaced ones.
func (s *Server) ResourcePath(ctx context.Context, apiVersion, kind, namespace string) (string, error) {
	base := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		base = "/api/" + apiVersion // the core group
	}
	resp, err := s.Do(ctx, Request{Method: "GET", Path: base})
	if err != nil {
		return "", err
	}
	if resp.Status == http.StatusNotFound {
		return "", fmt.Errorf("%s %s: %w (no %s)", apiVersion, kind, ErrUnknownKind, base)
	}
	if err := resp.Err(); err != nil {
		return "", fmt.Errorf("discovery %s: %w", base, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		return "", fmt.Errorf("discovery %s: %w", base, err)
	}
	for _, r := range list.APIResources {
		if r.Kind != kind || strings.Contains(r.Name, "/") {
			continue // subresources have the kind of their parent or their own
		}
		if !r.Namespaced {
			return base + "/" + r.Name, nil
		}
		if namespace == "" {
			return "", fmt.Errorf("%s %s is namespaced and no namespace was given", apiVersion, kind)
		}
		return base + "/namespaces/" + namespace + "/" + r.Name, nil
	}
	return "", fmt.Errorf("%s %s: %w (not in %s)", apiVersion, kind, ErrUnknownKind, base)
}

// ServiceAccountToken asks the TokenRequest API for a token of the existing
// ServiceAccount namespace/name (audience: the API server's own), for tests of
// what RBAC lets that account do. It fails the test on any error.
func (s *Server) ServiceAccountToken(t testing.TB, namespace, name string) string {
	t.Helper()
	body, err := json.Marshal(authenticationv1.TokenRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Do(context.Background(), Request{
		Method: "POST",
		Path:   "/api/v1/namespaces/" + namespace + "/serviceaccounts/" + name + "/token",
		Body:   body,
	})
	if err == nil {
		err = resp.Err()
	}
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	var tr authenticationv1.TokenRequest
	if err := json.Unmarshal(resp.Body, &tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: no token in %s (%v)", namespace, name, resp.Body, err)
	}
	return tr.Status.Token
}

// WriteKubeconfig writes a kubeconfig for token (the admin's when empty) to a
// new file in the test's temporary directory and returns its path: one
// cluster (URL, CAPEM as certificate-authority-data), one user, one context,
// current. It is JSON, which is YAML too.
func (s *Server) WriteKubeconfig(t testing.TB, token string) string {
	t.Helper()
	if token == "" {
		token = s.Token
	}
	cfg := fmt.Sprintf(`{
  "apiVersion": "v1",
  "kind": "Config",
  "clusters": [{"name": "kubetest", "cluster": {"server": %q, "certificate-authority-data": %q}}],
  "users": [{"name": "kubetest", "user": {"token": %q}}],
  "contexts": [{"name": "kubetest", "context": {"cluster": "kubetest", "user": "kubetest"}}],
  "current-context": "kubetest"
}
`, s.URL, base64.StdEncoding.EncodeToString(s.CAPEM), token)
	f, err := os.CreateTemp(t.TempDir(), "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(f.Name())
}
