/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The record the socket iterators (sockiter.bpf.c) write, one per socket,
 * with bpf_seq_write. Defined once, here; Go uses the type bpf2go generates
 * from it (tracer.sockiterSockRec), never a copy.
 */
#ifndef SOCKITER_H
#define SOCKITER_H

/* sock_rec.source: which program wrote the record. */
enum sockiter_source {
	SOCKITER_SRC_TCP = 1,  /* iter/tcp: the netns's ehash and listening hash */
	SOCKITER_SRC_UDP = 2,  /* iter/udp: the netns's UDP sockets (bound ones) */
	SOCKITER_SRC_FILE = 3, /* iter/task_file: a TCP socket that is only bound (CLOSE, holding a port) */
	/* Not a socket: the node walk (nodewalk.bpf.c) left buckets of the
	 * TCP hash tables unread: inode of them, from bucket netns. */
	SOCKITER_SRC_CUT = 4,
	/* Not a socket: the node walk read chunk inode of the hash tables. */
	SOCKITER_SRC_CHUNK = 5,
	/* Not a socket: the node walk is past the last bucket (inode: how
	 * many buckets the tables have). */
	SOCKITER_SRC_END = 6,
};

/* sock_rec.flags */
enum sockiter_flag {
	/* fastreuse and fastreuseport were read from the port's bind bucket
	 * (icsk_bind_hash, or tw_tb of a TIME_WAIT socket). */
	SOCKITER_F_BUCKET = 1,
	/* reuse, reuseport and bound_dev_if are the socket's own options
	 * (a full socket or a TIME_WAIT one: not a request socket, whose
	 * skc_bound_dev_if is the incoming interface). */
	SOCKITER_F_OPTS = 2,
	SOCKITER_F_REUSEPORT = 4, /* skc_reuseport (SO_REUSEPORT) */
	/* No file holds it any more: a full socket with SOCK_DEAD (closed, in
	 * FIN_WAIT1/2, CLOSING or LAST_ACK), or a minisocket in FIN_WAIT2. Not
	 * set for TIME_WAIT, nor for a child in an accept queue (no sk_socket
	 * yet, but no orphan). */
	SOCKITER_F_ORPHAN = 8,
	/* A TIME_WAIT minisocket: state is its tw_substate (TIME_WAIT, or
	 * FIN_WAIT2 for an orphan whose FIN_WAIT2 became a minisocket, as ss
	 * shows them), and tw_ts_recent_stamp is valid. */
	SOCKITER_F_TW = 16,
	/* tw_entry_stamp exists on this kernel (6.13+) and was read. */
	SOCKITER_F_TW_ENTRY = 32,
	/* A request socket (NEW_SYN_RECV): state says SYN_RECV, as sock_diag
	 * and ss do; inode 0, uid its listener's, options unknown. */
	SOCKITER_F_REQ = 64,
};

/* Values the programs test, from the kernel's ABI (these never change). */
#define SOCKITER_AF_INET 2
#define SOCKITER_AF_INET6 10
#define SOCKITER_IPPROTO_TCP 6
#define SOCKITER_SOCK_STREAM 1
#define SOCKITER_TCP_SYN_RECV 3
#define SOCKITER_TCP_TIME_WAIT 6
#define SOCKITER_TCP_CLOSE 7
#define SOCKITER_TCP_NEW_SYN_RECV 12
#define SOCKITER_S_IFMT 0170000
#define SOCKITER_S_IFSOCK 0140000

/* One socket. 80 bytes, no holes (static asserts in sockiter.bpf.c). */
struct sock_rec {
	__u8 saddr[16];       /* local address: AF_INET in the first 4 bytes; network order */
	__u8 daddr[16];       /* remote address, as saddr; zero when not connected */
	__u64 inode;          /* socket inode (the fd's i_ino); 0 for minisockets and kernel sockets */
	__s64 tw_ts_recent_stamp; /* F_TW: seconds of ktime_get_seconds (CLOCK_MONOTONIC_COARSE); 0: no timestamps */
	__u32 tw_entry_stamp; /* F_TW_ENTRY: ms of CLOCK_MONOTONIC (tcp_clock_ms), as u32 */
	__u32 netns;          /* inode of the socket's netns (sk_net->ns.inum) */
	__u32 uid;            /* the iterator's uid (iter/tcp, iter/udp), sk_uid (task_file) */
	__s32 bound_dev_if;   /* F_OPTS: skc_bound_dev_if (SO_BINDTODEVICE), 0 none */
	__u16 sport;          /* local port, host order */
	__u16 dport;          /* remote port, host order */
	__u16 family;         /* AF_INET or AF_INET6 */
	__u16 flags;          /* enum sockiter_flag */
	__u8 source;          /* enum sockiter_source */
	__u8 proto;           /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 state;           /* skc_state; tw_substate for minisockets, SYN_RECV for request sockets */
	__u8 reuse;           /* F_OPTS: skc_reuse: 0 SK_NO_REUSE, 1 SK_CAN_REUSE (SO_REUSEADDR), 2 SK_FORCE_REUSE */
	__s8 fastreuse;       /* F_BUCKET: the bind bucket's fastreuse (-1: made by connect()) */
	__s8 fastreuseport;   /* F_BUCKET: its fastreuseport */
	__u8 pad[2];
};

/* Names the enums in BTF, so that bpf2go -type exports them. */
struct sockiter_enums {
	enum sockiter_source source;
	enum sockiter_flag flag;
};

#endif /* SOCKITER_H */
