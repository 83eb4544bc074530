// Package ipvsreply is a make kernels guest test (testdata/kernels/tests.txt,
// tag ipvs: Debian 12's 6.1 and Debian 13's 6.12 amd64 guests, which ship
// ip_vs; this machine's kernel has no IPVS). It answers one question for the
// diagnosis of diagnose/nodeport: when a connect()'s kernel-picked source
// port is also a NodePort of kube-proxy's IPVS mode (a virtual service on
// the node's address), does IPVS take the reply, so that the connect times
// out?
//
// The setup, all in namespaces of the test's own: a "node" netns and a
// "peer" netns joined by a veth pair (192.0.2.1 and 192.0.2.2, TEST-NET-1,
// on no other interface). The peer listens on 8081. The node has an IPVS
// virtual service TCP 192.0.2.1:30080 masquerading to a backend, as
// kube-proxy makes for a NodePort, ip_local_port_range "30080 30080" (so the
// kernel must pick 30080) and tcp_syn_retries 1 (so a lost handshake ends in
// ETIMEDOUT after two SYNs instead of two minutes).
//
// Finding (what the test asserts): IPVS takes the peer's SYN-ACK to
// 192.0.2.1:30080.
// tcp_conn_schedule schedules on any SYN, SYN-ACK included ("No !th->ack
// check to allow scheduling on SYN+ACK for Active FTP",
// net/netfilter/ipvs/ip_vs_proto_tcp.c), so the reply becomes a new IPVS
// connection from 192.0.2.2:8081 to the virtual service, forwarded to the
// backend, and never reaches the client socket: connect() fails with
// ETIMEDOUT. The same connect from a port that is not a virtual service
// (30090) succeeds, and diagnose/nodeport's Read names the service the
// reply hit.
//
// Seen on 2026-12-03 under qemu TCG, the same on Debian 12's 6.1.0-57 and
// Debian 13's 6.12.118: connect() ETIMEDOUT after 3.05-3.09 s (two SYNs);
// the virtual service counted 1 connection and 3 incoming packets (180
// bytes: the SYN-ACKs), none out; ip_vs_conn held
// "TCP C0000202 1F91 C0000201 7580 C0000203 1F90 SYN_RECV" (192.0.2.2:8081
// -> 192.0.2.1:30080 -> backend 192.0.2.3:8080); from port 30090 the same
// connect succeeded in 3-8 ms. The elapsed times are logged, not asserted.
package ipvsreply
