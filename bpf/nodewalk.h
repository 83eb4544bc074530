/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The records of the node walk (nodewalk.bpf.c) besides the sockets, which
 * are struct sock_rec of sockiter.h. Defined once, here; Go uses the types
 * bpf2go generates from them.
 */
#ifndef NODEWALK_H
#define NODEWALK_H

/* The first member of every record of the task walk. */
enum nodewalk_kind {
	NODEWALK_MEMBER = 1,   /* struct nodewalk_member */
	NODEWALK_NETNS = 2,    /* struct nodewalk_netns */
	NODEWALK_RESERVED = 3, /* struct nodewalk_reserved */
};

enum nodewalk_flag {
	NODEWALK_F_KTHREAD = 1,   /* member: a kernel thread */
	/* netns: its TCP sockets are in hash tables of its own
	 * (net.ipv4.tcp_child_ehash_entries), not the ones walked. */
	NODEWALK_F_OWN_EHASH = 2,
	NODEWALK_F_TW_DELAY = 4,  /* netns: tw_reuse_delay was read (6.13+) */
};

/* A chunk of the hash walk buffers up to NODEWALK_CHUNK_RECS sockets
 * before it writes them: its output stays within the 32 KiB the kernel
 * gives one object (bpf_seq_read). */
#define NODEWALK_CHUNK_RECS 320
#define NODEWALK_RESERVED_WORDS 1024 /* 65536 ports, one bit each */

/* A process (thread group leader) of eaddr's pid namespace, and its netns. */
struct nodewalk_member {
	__u32 kind;
	__u32 netns;
	__u32 pid; /* in the reader's pid namespace */
	__u32 flags;
};

/* A netns's port settings, once per walk, the first time a task in it is
 * seen. */
struct nodewalk_netns {
	__u32 kind;
	__u32 netns;
	__u32 flags;
	__u16 port_lo, port_hi;    /* net.ipv4.ip_local_port_range */
	__s32 unpriv_start;        /* net.ipv4.ip_unprivileged_port_start */
	__u32 tw_reuse_delay;      /* F_TW_DELAY: net.ipv4.tcp_tw_reuse_delay, ms */
	__u8 tw_reuse;             /* net.ipv4.tcp_tw_reuse */
	__u8 pad[7];
};

/* A netns's net.ipv4.ip_local_reserved_ports, as the kernel keeps it: bit
 * p of the bitmap (unsigned longs, little-endian words) is port p. Right
 * after its nodewalk_netns. */
struct nodewalk_reserved {
	__u32 kind;
	__u32 netns;
	__u64 bits[NODEWALK_RESERVED_WORDS];
};

/* Names the types in BTF, so that bpf2go -type exports them. */
struct nodewalk_enums {
	enum nodewalk_kind kind;
	enum nodewalk_flag flag;
};

#endif /* NODEWALK_H */
