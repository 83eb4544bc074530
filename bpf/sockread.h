/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Reading one socket into a struct sock_rec: the code the socket iterators
 * (sockiter.bpf.c, one netns) and the node walk (nodewalk.bpf.c, every
 * netns at once) share, so that both read a socket the same way. Include
 * after include/sockiter_core.h, the bpf headers and sockiter.h.
 *
 * Every read is bpf_probe_read_kernel (BPF_CORE_READ): the pointers are
 * cast to the types the socket's state says it is of.
 */
#ifndef SOCKREAD_H
#define SOCKREAD_H

static __always_inline __u32 sk_netns(const struct sock_common *skc)
{
	return BPF_CORE_READ(skc, skc_net.net, ns.inum);
}

/* The fields every socket has (struct sock_common: full sockets,
 * minisockets and request sockets alike). */
static __always_inline void read_common(struct sock_rec *r, const struct sock_common *skc)
{
	r->family = BPF_CORE_READ(skc, skc_family);
	r->state = BPF_CORE_READ(skc, skc_state);
	r->sport = BPF_CORE_READ(skc, skc_num);
	r->dport = bpf_ntohs(BPF_CORE_READ(skc, skc_dport));
	r->netns = sk_netns(skc);
	if (r->family == SOCKITER_AF_INET6) {
		BPF_CORE_READ_INTO(&r->saddr, skc, skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&r->daddr, skc, skc_v6_daddr.in6_u.u6_addr8);
	} else {
		BPF_CORE_READ_INTO((__be32 *)r->saddr, skc, skc_rcv_saddr);
		BPF_CORE_READ_INTO((__be32 *)r->daddr, skc, skc_daddr);
	}
}

/* SO_REUSEADDR, SO_REUSEPORT, SO_BINDTODEVICE: set on full sockets and
 * copied to their TIME_WAIT minisockets (inet_twsk_alloc). */
static __always_inline void read_opts(struct sock_rec *r, const struct sock_common *skc)
{
	r->reuse = BPF_CORE_READ_BITFIELD_PROBED(skc, skc_reuse);
	if (BPF_CORE_READ_BITFIELD_PROBED(skc, skc_reuseport))
		r->flags |= SOCKITER_F_REUSEPORT;
	r->bound_dev_if = BPF_CORE_READ(skc, skc_bound_dev_if);
	r->flags |= SOCKITER_F_OPTS;
}

static __always_inline void read_bucket(struct sock_rec *r, const struct inet_bind_bucket *tb)
{
	if (!tb)
		return;
	r->fastreuse = BPF_CORE_READ(tb, fastreuse);
	r->fastreuseport = BPF_CORE_READ(tb, fastreuseport);
	r->flags |= SOCKITER_F_BUCKET;
}

/* A full socket: its options, its file's inode, whether it is an orphan,
 * and (TCP) its port's bind bucket. */
static __always_inline void read_full(struct sock_rec *r, const struct sock *sk, bool tcp)
{
	const struct sock_common *skc = &sk->__sk_common;
	struct socket *sock = BPF_CORE_READ(sk, sk_socket);
	unsigned long flags = BPF_CORE_READ(skc, skc_flags);

	read_opts(r, skc);
	/* sock_orphan() sets SOCK_DEAD as it clears sk_socket. A NULL
	 * sk_socket alone is no orphan: an accept queue's children have none
	 * yet. */
	if (flags & (1UL << bpf_core_enum_value(enum sock_flags, SOCK_DEAD)))
		r->flags |= SOCKITER_F_ORPHAN;
	if (sock)
		r->inode = BPF_CORE_READ(sock, file, f_inode, i_ino);
	if (tcp)
		read_bucket(r, BPF_CORE_READ((const struct inet_connection_sock *)sk, icsk_bind_hash));
}

/* A TIME_WAIT minisocket (inet_timewait_sock in a tcp_timewait_sock). */
static __always_inline void read_tw(struct sock_rec *r, const struct sock_common *skc)
{
	const struct inet_timewait_sock *tw = (const void *)skc;
	const struct tcp_timewait_sock *tcptw = (const void *)skc;

	r->flags |= SOCKITER_F_TW;
	r->state = BPF_CORE_READ(tw, tw_substate);
	if (r->state != SOCKITER_TCP_TIME_WAIT)
		r->flags |= SOCKITER_F_ORPHAN; /* an orphan's FIN_WAIT2, as a minisocket */
	read_opts(r, skc);
	read_bucket(r, BPF_CORE_READ(tw, tw_tb));
	r->tw_ts_recent_stamp = BPF_CORE_READ(tcptw, tw_ts_recent_stamp);
	if (bpf_core_field_exists(tw->tw_entry_stamp)) {
		r->tw_entry_stamp = BPF_CORE_READ(tw, tw_entry_stamp);
		r->flags |= SOCKITER_F_TW_ENTRY;
	}
}

/* The TCP socket behind a task's file, or NULL when the file is no inet
 * TCP socket. */
static __always_inline const struct sock *file_tcp_sock(struct file *file)
{
	unsigned short mode = BPF_CORE_READ(file, f_inode, i_mode);
	if ((mode & SOCKITER_S_IFMT) != SOCKITER_S_IFSOCK)
		return 0;
	struct socket *sock = BPF_CORE_READ(file, private_data);
	if (!sock)
		return 0;
	/* private_data is a struct socket only for socket files (not, e.g.,
	 * an O_PATH file of a socket's path): check the back pointer. */
	if (BPF_CORE_READ(sock, file) != file)
		return 0;
	const struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return 0;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != SOCKITER_AF_INET && family != SOCKITER_AF_INET6)
		return 0;
	if (BPF_CORE_READ(sk, sk_protocol) != SOCKITER_IPPROTO_TCP ||
	    BPF_CORE_READ(sk, sk_type) != SOCKITER_SOCK_STREAM)
		return 0;
	return sk;
}

/* A socket of the TCP hash tables (the established hash, with its
 * TIME_WAIT minisockets and request sockets, and the listening hash), as
 * iter/tcp hands it over: its uid is the socket's own (sk_uid), 0 for a
 * TIME_WAIT one and the listener's for a request socket, as iter/tcp
 * gives it (bpf_iter_tcp_seq_show). */
static __always_inline void read_tcp_hashed(struct sock_rec *r, const struct sock_common *skc)
{
	r->source = SOCKITER_SRC_TCP;
	r->proto = SOCKITER_IPPROTO_TCP;
	read_common(r, skc);
	if (r->state == SOCKITER_TCP_TIME_WAIT) {
		read_tw(r, skc);
	} else if (r->state == SOCKITER_TCP_NEW_SYN_RECV) {
		r->flags |= SOCKITER_F_REQ;
		r->state = SOCKITER_TCP_SYN_RECV; /* as sock_diag and ss show it */
		r->uid = BPF_CORE_READ(skc, skc_listener, sk_uid.val);
	} else {
		read_full(r, (const struct sock *)skc, true);
		r->uid = BPF_CORE_READ((const struct sock *)skc, sk_uid.val);
	}
}

/* The TCP socket behind file if it holds a port and is in no hash table a
 * walk of them sees: CLOSE with a bind bucket (bound, never listened nor
 * connected, or bound to a port and reset since); NULL otherwise. */
static __always_inline const struct sock *bound_only(struct file *file)
{
	const struct sock *sk = file_tcp_sock(file);
	if (!sk)
		return 0;
	if (BPF_CORE_READ(sk, __sk_common.skc_state) != SOCKITER_TCP_CLOSE)
		return 0;
	if (!BPF_CORE_READ((const struct inet_connection_sock *)sk, icsk_bind_hash))
		return 0;
	return sk;
}

/* A socket bound_only found. */
static __always_inline void read_bound_only(struct sock_rec *r, const struct sock *sk)
{
	r->source = SOCKITER_SRC_FILE;
	r->proto = SOCKITER_IPPROTO_TCP;
	r->uid = BPF_CORE_READ(sk, sk_uid.val);
	read_common(r, &sk->__sk_common);
	read_full(r, sk, true);
}

#endif /* SOCKREAD_H */
