/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The kernel types the socket iterators (sockiter.bpf.c) read, written by
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
};

struct seq_file;
struct task_struct;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
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
	unsigned long skc_flags; /* full sockets only: a union with skc_tw_dr and skc_listener */
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

#endif /* SOCKITER_CORE_H */
