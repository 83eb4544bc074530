/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The few kernel types eaddr reads, written by hand instead of a 3 MB vmlinux.h.
 * Every struct carries preserve_access_index, so the loader relocates each field
 * access against the running kernel's BTF (CO-RE): only the names and types of
 * the fields matter here, not their order or the members left out.
 */
#ifndef EADDR_CORE_H
#define EADDR_CORE_H

/* Tells libbpf's bpf_tracing.h to use the kernel's pt_regs field names. */
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

/* From include/uapi/linux/bpf.h: the values are ABI and never change. */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_LRU_PERCPU_HASH = 10,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};

#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r10;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));
#elif defined(__TARGET_ARCH_arm64)
/* bpf_tracing.h reads regs[1..] through user_pt_regs, which is the first
 * member of the kernel's struct pt_regs, and orig_x0 through its own type. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
} __attribute__((preserve_access_index));
struct pt_regs {
	__u64 orig_x0;
} __attribute__((preserve_access_index));
#else
#error "eaddr supports __TARGET_ARCH_x86 and __TARGET_ARCH_arm64"
#endif

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
	__u64 net_cookie; /* never reused, unlike ns.inum (5.12+; read as 0 where absent) */
} __attribute__((preserve_access_index));

/* kernfs: the cgroup v2 directory of a task, named leaf to root. */
struct kernfs_node {
	struct kernfs_node *__parent; /* 6.15+ */
	const char *name;
	__u64 id; /* == bpf_get_current_cgroup_id() for the task's cgroup */
} __attribute__((preserve_access_index));

/* Before 6.15 the parent pointer was called parent. */
struct kernfs_node___pre615 {
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct mnt_namespace {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct mnt_namespace *mnt_ns;
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct qstr {
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct super_block {
	unsigned int s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct dentry {
	struct qstr d_name;
} __attribute__((preserve_access_index));

struct path {
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	void *private_data;
	struct path f_path;
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct mm_struct {
	struct file *exe_file;
	unsigned long arg_start;
	unsigned long arg_end;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct task_struct *real_parent;
	struct files_struct *files;
	struct nsproxy *nsproxy;
	struct mm_struct *mm;
	struct task_struct *group_leader;
	struct css_set *cgroups;
	__u64 start_boottime; /* ns since boot; /proc/PID/stat starttime is the group leader's, in clock ticks */
	__u64 self_exec_id;   /* one more with each execve() */
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
} __attribute__((preserve_access_index));

typedef struct {
	__s64 counter;
} atomic64_t;

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state; /* TCP_* */
	possible_net_t skc_net;
	struct in6_addr skc_v6_rcv_saddr;
	atomic64_t skc_cookie; /* the socket's cookie, 0 until one is asked for (sock_gen_cookie) */
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	__u16 sk_protocol;
	int sk_err; /* the socket's pending error (a positive errno) */
	/* SOCK_BINDPORT_LOCK (4): the port was bind()'s, kept at close. A
	 * 4-bit bitfield before 6.2, a __u8 since: read it with
	 * BPF_CORE_READ_BITFIELD. */
	__u8 sk_userlocks : 4;
} __attribute__((preserve_access_index));

struct inet_sock {
	struct sock sk;
	__be16 inet_sport; /* the source port, network order: still set after close released inet_num */
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 rcv_nxt; /* the next sequence number expected: tcp_connect_init sets 0, a SYN-ACK the peer's */
} __attribute__((preserve_access_index));

struct socket {
	short type;
	struct file *file;
	struct sock *sk;
} __attribute__((preserve_access_index));

#endif /* EADDR_CORE_H */
