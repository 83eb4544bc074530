/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The kernel types bpf/nodedrop.bpf.c reads beyond eaddr_core.h's: the
 * dropped skb, its device and its conntrack entry. CO-RE, as eaddr_core.h:
 * only the names and types of the fields matter, the loader relocates each
 * access against the running kernel's BTF. Anonymous members (the skb's
 * header offsets sit in a struct_group, the tuple's dst is an unnamed
 * struct) are found by name through them.
 */
#ifndef NODEDROP_CORE_H
#define NODEDROP_CORE_H

struct net_device {
	char name[16]; /* IFNAMSIZ */
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	struct sock *sk;
	int skb_iif;          /* the device the packet came in on; 0 for one made on this host */
	unsigned long _nfct;  /* struct nf_conn * | ctinfo (the low 3 bits); CONFIG_NF_CONNTRACK */
	__u16 transport_header;
	__u16 network_header; /* offsets from head */
	unsigned char *head;
} __attribute__((preserve_access_index));

union nf_inet_addr {
	__u32 all[4];
	__be32 ip;
	__be32 ip6[4];
} __attribute__((preserve_access_index));

union nf_conntrack_man_proto {
	__be16 all;
} __attribute__((preserve_access_index));

struct nf_conntrack_man {
	union nf_inet_addr u3;
	union nf_conntrack_man_proto u;
	__u16 l3num;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple {
	struct nf_conntrack_man src;
	struct {
		union nf_inet_addr u3;
		union {
			__be16 all;
		} u;
		__u8 protonum;
	} dst;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
} __attribute__((preserve_access_index));

struct nf_conn {
	struct nf_conntrack_tuple_hash tuplehash[2]; /* IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY */
	unsigned long status;                        /* IPS_* (uapi nf_conntrack_common.h) */
} __attribute__((preserve_access_index));

#endif /* NODEDROP_CORE_H */
