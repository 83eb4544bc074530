/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What bpf/nodedrop.bpf.c sends: one record per packet the node threw away
 * that was the first of a new flow (a TCP SYN without ACK; a UDP packet
 * whose conntrack entry is not confirmed, or that has none). Go uses the
 * type bpf2go generates (tracer.NodeDropRecord), never a copy.
 */
#ifndef NODEDROP_H
#define NODEDROP_H

/* node_drop.flags */
enum node_drop_flag {
	NODEDROP_F_CT = 1,        /* the skb had a conntrack entry: ct_* are its tuples and status */
	NODEDROP_F_CONFIRMED = 2, /* ... in the table already (IPS_CONFIRMED) */
	NODEDROP_F_SRC_NAT = 4,   /* ... with its source NAT done (IPS_SRC_NAT_DONE): the reply tuple has the node's port */
	NODEDROP_F_HEADER = 8,    /* hdr_* were read from the IP header */
	NODEDROP_F_SOCKET = 16,   /* the netns is the skb's socket's (no device yet: a packet of this host) */
};

/* Per CPU, in the one-entry per-CPU array `drop_cpus`. */
struct drop_cpu {
	__u64 tat;  /* the rate limit's theoretical arrival time (GCRA), ns since boot */
	__u64 seen; /* first packets of new flows dropped with a watched reason */
	__u64 held; /* of those, held back by the rate limit */
	__u64 lost; /* of those, lost: the ring was full */
};

struct node_drop {
	__u64 boot_ns;      /* bpf_ktime_get_boot_ns() at the drop */
	__u64 location;     /* the kernel address that freed it (nf_hook_slow, nft_do_chain, ...) */
	__u64 netns_cookie; /* 0 where the kernel has none (<5.12) */
	__u32 netns;        /* inode of the netns that dropped it */
	__u32 reason;       /* enum skb_drop_reason, this kernel's number: Go names it from BTF */
	__s32 in_ifindex;   /* skb_iif: the device it came in on, 0 for a packet of this host */
	__s32 out_ifindex;  /* skb->dev at the drop, 0 when none */
	__u16 family;       /* AF_INET, AF_INET6 */
	__u8 protocol;      /* IPPROTO_TCP, IPPROTO_UDP */
	__u8 flags;         /* enum node_drop_flag, or-ed */
	__u32 pad;
	char dev[16];       /* skb->dev's name at the drop */
	/* The conntrack entry's tuples (NODEDROP_F_CT): the original one is the
	 * flow as its sender made it (a pod's own 4-tuple; behind a ClusterIP,
	 * the ClusterIP it asked for), the reply one as the answer would come
	 * (after SNAT: to the node's address and the port MASQUERADE chose). */
	__u8 ct_src[16], ct_dst[16];
	__u16 ct_sport, ct_dport; /* host byte order */
	__u8 rp_src[16], rp_dst[16];
	__u16 rp_sport, rp_dport;
	/* The IP header as dropped (NODEDROP_F_HEADER): after SNAT, the node's. */
	__u8 hdr_src[16], hdr_dst[16];
	__u16 hdr_sport, hdr_dport;
	__u32 pad2;
	__u64 ct_status;    /* IPS_* of the entry */
};

_Static_assert(sizeof(struct node_drop) == 184, "node_drop layout changed");

/* Never instantiated: makes the enum part of the object's BTF. */
struct nodedrop_enums {
	enum node_drop_flag flag;
};

#endif /* NODEDROP_H */
