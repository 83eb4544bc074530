//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * eaddr: the packets a node throws away that opened new flows.
 *
 * One program on the BTF tracepoint skb:kfree_skb (tp_btf: the skb, the
 * address that freed it, and why, enum skb_drop_reason). A connect() whose
 * SYN the node's netfilter dropped (MASQUERADE found no free port and
 * conntrack refused the entry; a full conntrack table; a DROP rule) gets no
 * errno, no RST, no ICMP: only a timeout. This program sees those drops, so
 * that user space can tell the timeout which layer dropped it.
 *
 * Cheapest test first: the reason (a bitmap set from Go, which reads the
 * reason numbers by name from the kernel's BTF, as they change between
 * kernels); then the IP header: a TCP SYN without ACK, or a UDP packet
 * whose conntrack entry is not confirmed (or that has none); then a
 * per-CPU rate limit (GCRA), counted, before the ring.
 */
#include "include/eaddr_core.h"
#include "include/nodedrop_core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "nodedrop.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define ND_AF_INET 2
#define ND_AF_INET6 10
#define ND_IPPROTO_TCP 6
#define ND_IPPROTO_UDP 17
#define ND_NFCT_PTRMASK (~7UL)
#define ND_IPS_CONFIRMED (1UL << 3)
#define ND_IPS_SRC_NAT_DONE (1UL << 7)
#define ND_TCP_SYN 0x02
#define ND_TCP_ACK 0x10

/* Set by user space through spec.Variables before load. */
/* Bit N set: watch drop reason N (this kernel's numbering). */
const volatile __u64 reason_mask[4] = {0, 0, 0, 0};
/* The rate limit per CPU: a drop may pass once every interval, bursts of
 * tolerance / interval + 1; 0: no limit. */
const volatile __u64 drop_interval_ns = 0;
const volatile __u64 drop_tolerance_ns = 0;
/* Wake the reader only once this many bytes wait in the ring; it also
 * reads on a short timer. A wakeup per record (a self-IPI) cost 7 us of
 * the 7.5 us of a drop read whole on this VM. 0: wake for each. */
const volatile __u64 drop_wakeup_bytes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_cpu);
} drop_cpus SEC(".maps");

/* Force the types into BTF so bpf2go -type can emit them. */
const struct node_drop *unused_node_drop __attribute__((unused));
const struct drop_cpu *unused_drop_cpu __attribute__((unused));
const struct nodedrop_enums *unused_nodedrop_enums __attribute__((unused));

static __always_inline bool watched(__u32 reason)
{
	if (reason >= 256)
		return false; /* a subsystem's reason (SKB_DROP_REASON_SUBSYS_MASK), or past the map */
	__u32 word = reason >> 6;
	barrier_var(word);
	return reason_mask[word & 3] & (1ULL << (reason & 63));
}

/* The first bytes of the IP header and of the layer 4 header: family,
 * protocol, addresses, ports, and whether a TCP segment is a bare SYN.
 * False for what is not an unfragmented TCP or UDP packet over IPv4 or
 * IPv6 without extension headers. */
static __always_inline bool read_header(struct node_drop *d, struct sk_buff *skb, bool *syn)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	if (!head || nh == 0xffff)
		return false;
	__u8 ip[40];
	if (bpf_probe_read_kernel(ip, 20, head + nh))
		return false;
	__u32 l4;
	if ((ip[0] >> 4) == 4) {
		if ((ip[6] & 0x1f) || ip[7]) /* a fragment's offset: no layer 4 header here */
			return false;
		d->family = ND_AF_INET;
		d->protocol = ip[9];
		__builtin_memcpy(d->hdr_src, ip + 12, 4);
		__builtin_memcpy(d->hdr_dst, ip + 16, 4);
		l4 = (ip[0] & 0xf) * 4;
	} else if ((ip[0] >> 4) == 6) {
		if (bpf_probe_read_kernel(ip, 40, head + nh))
			return false;
		d->family = ND_AF_INET6;
		d->protocol = ip[6];
		__builtin_memcpy(d->hdr_src, ip + 8, 16);
		__builtin_memcpy(d->hdr_dst, ip + 24, 16);
		l4 = 40;
	} else {
		return false;
	}
	if (d->protocol != ND_IPPROTO_TCP && d->protocol != ND_IPPROTO_UDP)
		return false;
	__u8 th[14];
	if (bpf_probe_read_kernel(th, sizeof(th), head + nh + (l4 & 0x3f)))
		return false;
	d->hdr_sport = (th[0] << 8) | th[1];
	d->hdr_dport = (th[2] << 8) | th[3];
	*syn = d->protocol == ND_IPPROTO_TCP && (th[13] & (ND_TCP_SYN | ND_TCP_ACK)) == ND_TCP_SYN;
	d->flags |= NODEDROP_F_HEADER;
	return true;
}

static __always_inline void read_tuple(const struct nf_conntrack_tuple *t, __u8 *src, __u8 *dst, __u16 *sport, __u16 *dport)
{
	BPF_CORE_READ_INTO((__u32(*)[4])src, t, src.u3.all);
	BPF_CORE_READ_INTO((__u32(*)[4])dst, t, dst.u3.all);
	*sport = __builtin_bswap16(BPF_CORE_READ(t, src.u.all));
	*dport = __builtin_bswap16(BPF_CORE_READ(t, dst.u.all));
}

/* The skb's conntrack entry's status and tuples, when it has one. */
static __always_inline void read_ct(struct node_drop *d, struct sk_buff *skb)
{
	if (!bpf_core_field_exists(skb->_nfct))
		return;
	struct nf_conn *ct = (struct nf_conn *)(BPF_CORE_READ(skb, _nfct) & ND_NFCT_PTRMASK);
	if (!ct)
		return;
	d->flags |= NODEDROP_F_CT;
	d->ct_status = BPF_CORE_READ(ct, status);
	if (d->ct_status & ND_IPS_CONFIRMED)
		d->flags |= NODEDROP_F_CONFIRMED;
	if (d->ct_status & ND_IPS_SRC_NAT_DONE)
		d->flags |= NODEDROP_F_SRC_NAT;
	read_tuple(&ct->tuplehash[0].tuple, d->ct_src, d->ct_dst, &d->ct_sport, &d->ct_dport);
	read_tuple(&ct->tuplehash[1].tuple, d->rp_src, d->rp_dst, &d->rp_sport, &d->rp_dport);
}

/* GCRA per CPU (no other writer): true when this drop is over budget. */
static __always_inline bool over_rate(struct drop_cpu *c)
{
	if (!drop_interval_ns)
		return false;
	__u64 now = bpf_ktime_get_ns();
	__u64 t = c->tat > now ? c->tat : now;
	if (t - now > drop_tolerance_ns)
		return true;
	c->tat = t + drop_interval_ns;
	return false;
}

/* The netns that dropped it: its device's, else (a packet of this host
 * before it has one) its socket's. */
static __always_inline void read_netns(struct node_drop *d, struct sk_buff *skb)
{
	struct net_device *dev = BPF_CORE_READ(skb, dev);
	struct net *net = 0;
	if (dev) {
		net = BPF_CORE_READ(dev, nd_net.net);
		d->out_ifindex = BPF_CORE_READ(dev, ifindex);
		BPF_CORE_READ_STR_INTO(&d->dev, dev, name);
	} else {
		struct sock *sk = BPF_CORE_READ(skb, sk);
		if (sk) {
			net = BPF_CORE_READ(sk, __sk_common.skc_net.net);
			d->flags |= NODEDROP_F_SOCKET;
		}
	}
	if (!net)
		return;
	d->netns = BPF_CORE_READ(net, ns.inum);
	if (bpf_core_field_exists(net->net_cookie))
		d->netns_cookie = BPF_CORE_READ(net, net_cookie);
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb_new_flow, struct sk_buff *skb, void *location, int reason)
{
	if (!watched((__u32)reason))
		return 0;
	struct node_drop d = {};
	bool syn = false;
	if (!read_header(&d, skb, &syn))
		return 0;
	/* A new flow's first packet: a bare SYN; a UDP packet conntrack has not
	 * confirmed an entry for (or made none for: a full table). */
	if (d.protocol == ND_IPPROTO_TCP && !syn)
		return 0;
	read_ct(&d, skb);
	if (d.protocol == ND_IPPROTO_UDP && (d.flags & NODEDROP_F_CONFIRMED))
		return 0;
	__u32 zero = 0;
	struct drop_cpu *c = bpf_map_lookup_elem(&drop_cpus, &zero);
	if (!c)
		return 0;
	c->seen++;
	if (over_rate(c)) {
		c->held++;
		return 0;
	}
	d.boot_ns = bpf_ktime_get_boot_ns();
	d.location = (__u64)location;
	d.reason = (__u32)reason;
	d.in_ifindex = BPF_CORE_READ(skb, skb_iif);
	read_netns(&d, skb);
	__u64 flags = 0;
	if (drop_wakeup_bytes)
		flags = bpf_ringbuf_query(&drops, BPF_RB_AVAIL_DATA) + sizeof(d) >= drop_wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&drops, &d, sizeof(d), flags))
		c->lost++;
	return 0;
}
