package kubetest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeKubectl, when set, makes this test binary a kubectl that hangs
// (TestKubectlHangSaysWhere runs it as Kubectl.Bin).
const fakeKubectl = "EADDR_KUBETEST_FAKE_KUBECTL"

func TestMain(m *testing.M) {
	if os.Getenv(fakeKubectl) == "hang" {
		fmt.Fprintln(os.Stderr, "I1204 fake kubectl: GET /apis/apps/v1/namespaces/eaddr/daemonsets/eaddr")
		hangInApply()
	}
	os.Exit(m.Run())
}

// hangInApply stands for a kubectl that waits on an API server that never
// answers; its name is what the dump must show.
func hangInApply() {
	time.Sleep(time.Hour)
}

// TestKubectlHangSaysWhere: a kubectl that outlives its timeout gets
// SIGQUIT, and the error names where its main goroutine was and what it
// had written, not only "signal: killed" (CI's TestClusterInstall/nodeport
// had nothing more to go on).
func TestKubectlHangSaysWhere(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeKubectl, "hang")
	k := &Kubectl{Bin: self, Timeout: time.Second, home: t.TempDir()}
	_, _, err = k.Run(nil, "apply", "-k", "deploy/kube-events")
	if err == nil {
		t.Fatal("a hung kubectl returned no error")
	}
	t.Logf("%v", err)
	for _, want := range []string{
		"kubectl apply -k deploy/kube-events: still running after 1s, sent SIGQUIT",
		"fake kubectl: GET /apis/apps/v1/namespaces/eaddr/daemonsets/eaddr",
		"its main goroutine (1 of ",
		"kubetest.hangInApply(",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q", want)
		}
	}
	if strings.Contains(err.Error(), "\ngoroutine 2 ") {
		t.Errorf("the error has more than the main goroutine")
	}
}
