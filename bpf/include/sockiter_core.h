/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The kernel types the socket iterators (sockiter.bpf.c) and the node walk
 * (nodewalk.bpf.c) read, written by
 * hand as eaddr_core.h is, and kept apart from it: eaddr.bpf.c never includes
 * this file, nor sockiter.bpf.c that one. Every struct carries
 * preserve_access_index, so each field access is relocated against the
 * running kernel's BTF (CO-RE): only names and types matter here.
 */
#ifndef SOCKITER_CORE_H
#define SOCKITER_CORE_H

#define __VMLINUX_H__

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* From include/uapi/linux/bpf.h: ABI values, never changed. */
enum bpf_map_type {
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
};

enum {
	BPF_ANY = 0,
};

struct seq_file;
struct sock;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net; /* below, with what the node walk reads of it */

typedef struct {
	struct net *net;
} possible_net_t;

struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
} __attribute__((preserve_access_index));

/* include/linux/list_nulls.h: a chain of the TCP hash tables ends in a
 * "nulls" pointer (bit 0 set) that carries the bucket's number. */
struct hlist_nulls_node {
	struct hlist_nulls_node *next;
} __attribute__((preserve_access_index));

struct hlist_nulls_head {
	struct hlist_nulls_node *first;
} __attribute__((preserve_access_index));

struct sock_common {
	struct hlist_nulls_node skc_nulls_node; /* in a union with skc_node */
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	unsigned char skc_reuse : 4;
	unsigned char skc_reuseport : 1;
	int skc_bound_dev_if;
	possible_net_t skc_net;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
	union {
		unsigned long skc_flags; /* full sockets */
		struct sock *skc_listener; /* request sockets: their listener */
	};
} __attribute__((preserve_access_index));

/* include/net/sock.h; the value is relocated against the kernel's enum. */
enum sock_flags {
	SOCK_DEAD = 0,
};

typedef struct {
	__u32 val;
} kuid_t;

struct socket;

struct sock {
	struct sock_common __sk_common;
	struct socket *sk_socket;
	kuid_t sk_uid;
	__u16 sk_type;
	__u16 sk_protocol;
} __attribute__((preserve_access_index));

struct inet_bind_bucket {
	signed char fastreuse;
	signed char fastreuseport;
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	struct inet_bind_bucket *icsk_bind_hash;
} __attribute__((preserve_access_index));

struct inet_timewait_sock {
	struct sock_common __tw_common;
	volatile unsigned char tw_substate;
	__u32 tw_entry_stamp; /* 6.13+ */
	struct inet_bind_bucket *tw_tb;
} __attribute__((preserve_access_index));

struct tcp_timewait_sock {
	int tw_ts_recent_stamp;
} __attribute__((preserve_access_index));

struct udp_sock; /* begins with its struct sock (inet.sk) */

struct inode {
	unsigned short i_mode;
	unsigned long i_ino;
} __attribute__((preserve_access_index));

struct file {
	void *private_data;
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct socket {
	struct file *file;
	struct sock *sk;
} __attribute__((preserve_access_index));

/* The iterators' contexts (DEFINE_BPF_ITER_FUNC in net/ipv4/tcp_ipv4.c,
 * net/ipv4/udp.c, kernel/bpf/task_iter.c). */
struct bpf_iter__tcp {
	union {
		struct bpf_iter_meta *meta;
	};
	union {
		struct sock_common *sk_common;
	};
	__u32 uid __attribute__((aligned(8)));
} __attribute__((preserve_access_index));

struct bpf_iter__udp {
	union {
		struct bpf_iter_meta *meta;
	};
	union {
		struct udp_sock *udp_sk;
	};
	__u32 uid __attribute__((aligned(8)));
	int bucket __attribute__((aligned(8)));
} __attribute__((preserve_access_index));

struct bpf_iter__task_file {
	union {
		struct bpf_iter_meta *meta;
	};
	union {
		struct task_struct *task;
	};
	__u32 fd __attribute__((aligned(8)));
	union {
		struct file *file;
	};
} __attribute__((preserve_access_index));

/* What the node walk (nodewalk.bpf.c) reads besides the sockets: the TCP
 * hash tables (include/net/inet_hashtables.h), a netns's port settings
 * (include/net/netns/ipv4.h), and the tasks. */
struct inet_ehash_bucket {
	struct hlist_nulls_head chain;
} __attribute__((preserve_access_index));

struct inet_listen_hashbucket {
	struct hlist_nulls_head nulls_head;
} __attribute__((preserve_access_index));

struct inet_hashinfo {
	struct inet_ehash_bucket *ehash;
	unsigned int ehash_mask;
	unsigned int lhash2_mask;
	struct inet_listen_hashbucket *lhash2;
} __attribute__((preserve_access_index));

struct inet_timewait_death_row {
	struct inet_hashinfo *hashinfo;
} __attribute__((preserve_access_index));

/* int range[2] under a seqlock up to 6.7, one u32 (high << 16 | low) from
 * 6.8: the walk tells them apart by the field's size. */
struct local_ports {
	__u32 range;
} __attribute__((preserve_access_index));

struct netns_ipv4 {
	struct inet_timewait_death_row tcp_death_row;
	struct local_ports ip_local_ports;
	unsigned long *sysctl_local_reserved_ports;
	int sysctl_ip_prot_sock;
	__u8 sysctl_tcp_tw_reuse;
	unsigned int sysctl_tcp_tw_reuse_delay; /* 6.13+ */
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
	struct netns_ipv4 ipv4;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct pid_namespace;

struct upid {
	int nr;
	struct pid_namespace *ns;
} __attribute__((preserve_access_index));

struct pid {
	unsigned int level;
	struct upid numbers[1];
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	unsigned int flags;
	struct nsproxy *nsproxy;
	struct pid *thread_pid;
} __attribute__((preserve_access_index));

struct bpf_map;

struct bpf_iter__task {
	union {
		struct bpf_iter_meta *meta;
	};
	union {
		struct task_struct *task;
	};
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_map_elem {
	union {
		struct bpf_iter_meta *meta;
	};
	union {
		struct bpf_map *map;
	};
	union {
		void *key;
	};
	union {
		void *value;
	};
} __attribute__((preserve_access_index));

#endif /* SOCKITER_CORE_H */
