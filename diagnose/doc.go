// Package diagnose says why a failure happened, from the state of the
// failure's network namespace: for an inet failure, the port budget as the
// kernel's port rules (portmodel) judge it, the sockets and processes that
// hold the ports, the NodePort overlap and the rule that took a reply; for
// a unix-socket failure, the socket file and its listener. Each cause comes
// with a verdict and a fix that was checked against that state before it is
// offered (Diagnoser, for trace). `check` audits every netns with the same
// model (AuditNetNS). A holder's pod UID and container ID come from its
// cgroup path (pod/kube's parser), and so does whose a netns is, which
// decides how a fix is applied (a pod's spec, the node's sysctl, nsenter);
// the runtime is asked only through Diagnoser.Pods, off the reader's path.
// It knows nothing of JSON.
package diagnose
