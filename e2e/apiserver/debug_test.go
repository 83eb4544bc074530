package apiserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/kubetest"
	corev1 "k8s.io/api/core/v1"
)

// debugDocs are the documents whose `kubectl debug node/...` commands
// TestDebugCommand runs.
var debugDocs = []string{"../README.md", "../docs/kubernetes.md", "../docs/runbook.md"}

// debugCommand is one `kubectl debug node/` command of a document's ```sh
// blocks, its backslash continuations joined and its # comment cut, split
// into words.
type debugCommand struct {
	where string
	words []string
}

// debugCommands returns the kubectl debug node commands of path. A command
// with quotes fails the test: the words are split on spaces, not by a shell.
func debugCommands(t *testing.T, path string) []debugCommand {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []debugCommand
	inSh := false
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```"):
			inSh = !inSh && strings.TrimPrefix(l, "```") == "sh"
			continue
		case !inSh || !strings.HasPrefix(l, "kubectl debug node/"):
			continue
		}
		where := filepath.Base(path) + ":" + strconv.Itoa(i+1)
		cmd := l
		for strings.HasSuffix(strings.TrimSpace(cmd), `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(strings.TrimSpace(cmd), `\`) + " " + lines[i]
		}
		if c, _, ok := strings.Cut(cmd, " #"); ok {
			cmd = c
		}
		if strings.ContainsAny(cmd, `'"$`+"`") {
			t.Fatalf("%s: %q has quotes or expansions: this test splits on spaces only", where, cmd)
		}
		out = append(out, debugCommand{where: where, words: strings.Fields(cmd)})
	}
	return out
}

// createdPod is the line kubectl debug node prints when it has created the
// pod.
var createdPod = regexp.MustCompile(`(?m)^Creating debugging pod (\S+) with container (\S+) on node (\S+)\.$`)

// TestDebugCommand runs the docs' node debug commands (README.md,
// docs/kubernetes.md), word for word, with the real kubectl against a real
// API server (internal/testing/kubetest) that has a Node: NODE is that Node's name,
// TAG is "latest" and then a version, as `make image` tags it. -it is left
// out: without a terminal kubectl creates the pod and returns. The pod it
// created runs the image that was imported on the node, never pulled
// (imagePullPolicy Never: the API server makes a :latest image Always,
// which a node with no registry for localhost/ cannot start), with what the
// sysadmin profile gives (privileged, hostPID, hostNetwork, hostIPC, the
// node's / at /host) on that node, and the command after "--".
func TestDebugCommand(t *testing.T) {
	var cmds []debugCommand
	for _, d := range debugDocs {
		cmds = append(cmds, debugCommands(t, d)...)
	}
	if len(cmds) < len(debugDocs) {
		t.Fatalf("found %d kubectl debug node commands in %q, want one in each at least", len(cmds), debugDocs)
	}
	s := kubetest.Start(t)
	k := s.Kubectl(t)
	for _, obj := range []string{
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}}`,
		// No controller manager makes the namespace's default account.
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default","namespace":"default"}}`,
	} {
		if _, _, err := k.Run([]byte(obj), "create", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cmds {
		for _, tag := range []string{"latest", "v0.1.0-3-g1c4e32f"} {
			t.Run(c.where+"/"+tag, func(t *testing.T) {
				checkDebugPod(t, runDebugCommand(t, k, c, tag), corev1.PullNever)
			})
		}
	}
	// The control: without --image-pull-policy, kubectl leaves the policy to
	// the API server, which makes a :latest image Always (what the flag is
	// there to prevent).
	t.Run("WithoutThePolicyFlag", func(t *testing.T) {
		c := cmds[0]
		c.words = slices.DeleteFunc(slices.Clone(c.words), func(w string) bool { return strings.HasPrefix(w, "--image-pull-policy") })
		checkDebugPod(t, runDebugCommand(t, k, c, "latest"), corev1.PullAlways)
	})
}

// debugRun is one pod kubectl debug made: what it was asked and what the
// API server stored.
type debugRun struct {
	pod     corev1.Pod
	image   string   // the --image value
	command []string // the words after --
}

// runDebugCommand runs c with NODE and TAG replaced and returns the pod it
// made.
func runDebugCommand(t *testing.T, k *kubetest.Kubectl, c debugCommand, tag string) *debugRun {
	t.Helper()
	var args []string
	for _, w := range c.words[1:] { // without "kubectl"
		if w == "-it" || w == "-ti" {
			continue
		}
		w = strings.ReplaceAll(w, "NODE", "node-a")
		w = strings.ReplaceAll(w, ":TAG", ":"+tag)
		args = append(args, w)
	}
	dash := slices.Index(args, "--")
	if dash < 0 || !slices.Contains(args[:dash], "--profile=sysadmin") {
		t.Fatalf("%s: %q: want --profile=sysadmin and a command after --", c.where, c.words)
	}
	var image string
	for _, a := range args[:dash] {
		if v, ok := strings.CutPrefix(a, "--image="); ok {
			image = v
		}
	}
	if !strings.HasPrefix(image, "localhost/eaddr:") {
		t.Fatalf("%s: image %q, want localhost/eaddr:TAG, as make image names it", c.where, image)
	}
	stdout, stderr, err := k.Run(nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	if len(stderr) > 0 {
		t.Errorf("kubectl %s: stderr: %s", strings.Join(args, " "), stderr)
	}
	m := createdPod.FindSubmatch(stdout)
	if m == nil {
		t.Fatalf("kubectl %s: no pod named in %q", strings.Join(args, " "), stdout)
	}
	out, _, err := k.Run(nil, "get", "pod", string(m[1]), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	r := &debugRun{image: image, command: args[dash+1:]}
	if err := json.Unmarshal(out, &r.pod); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl %s: pod %s", strings.Join(args, " "), r.pod.Name)
	return r
}

// checkDebugPod checks what the sysadmin profile and the flags gave the pod
// of r, and that its image pull policy is policy.
func checkDebugPod(t *testing.T, r *debugRun, policy corev1.PullPolicy) {
	t.Helper()
	pod, image, command := &r.pod, r.image, r.command
	spec := pod.Spec
	if spec.NodeName != "node-a" || !spec.HostPID || !spec.HostNetwork || !spec.HostIPC {
		t.Errorf("pod %s: nodeName %q hostPID %v hostNetwork %v hostIPC %v, want node-a and the node's namespaces",
			pod.Name, spec.NodeName, spec.HostPID, spec.HostNetwork, spec.HostIPC)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("pod %s: %d containers, want 1", pod.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != image || c.ImagePullPolicy != policy {
		t.Errorf("container %s: image %s, imagePullPolicy %s; want %s, %s", c.Name, c.Image, c.ImagePullPolicy, image, policy)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("container %s: securityContext %+v, want privileged", c.Name, c.SecurityContext)
	}
	if !slices.Equal(c.Command, command) || len(c.Args) > 0 {
		t.Errorf("container %s: command %q args %q, want command %q", c.Name, c.Command, c.Args, command)
	}
	hostRoot := ""
	for _, v := range spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == "/" {
			hostRoot = v.Name
		}
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == hostRoot && m.MountPath == "/host" && !m.ReadOnly
	})
	if hostRoot == "" || !mounted {
		t.Errorf("pod %s: volumes %+v, mounts %+v: want the node's / mounted read-write at /host", pod.Name, spec.Volumes, c.VolumeMounts)
	}
}
