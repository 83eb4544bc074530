/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Reading one socket into a struct sock_rec: the code the socket iterators
 * (sockiter.bpf.c, one netns) and the node walk (nodewalk.bpf.c, every
 * netns at once) share, so that both read a socket the same way. Include
 * after include/sockiter_core.h, the bpf headers and sockiter.h.
 *
 * A socket's first bytes (its struct sock_common, and a TIME_WAIT
 * minisocket's own fields) are copied with one bpf_probe_read_kernel and
 * read from the copy; what lies further (the bind bucket, the file, the
 * uid) is read where it is. Each probe read costs tens of ns, and the node
 * walk reads every socket of the node: the copy makes a socket four reads
 * instead of twenty. The pointers are cast to the types the socket's state
 * says it is of; every access is relocated (CO-RE).
 */
#ifndef SOCKREAD_H
#define SOCKREAD_H

#define SOCK_COPY_MAX 512

struct sock_copy {
	__u8 b[SOCK_COPY_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sock_copy);
} sockread_copy SEC(".maps");

/* The first bytes of sk copied with one read: as many as a
 * tcp_timewait_sock has, the smallest object the TCP hash tables hold (a
 * full socket is a tcp_sock or udp_sock, a request socket a
 * tcp_request_sock, both larger), so never a byte past the object. NULL
 * when it cannot be read. */
static __always_inline const void *sock_copy(const void *sk)
{
	__u32 zero = 0, size = bpf_core_type_size(struct tcp_timewait_sock);
	struct sock_copy *c = bpf_map_lookup_elem(&sockread_copy, &zero);

	if (!c)
		return 0;
	if (size > SOCK_COPY_MAX)
		size = SOCK_COPY_MAX;
	if (bpf_probe_read_kernel(c->b, size, sk))
		return 0;
	return c->b;
}

static __always_inline __u32 sk_netns(const struct sock_common *skc)
{
	return BPF_CORE_READ(skc, skc_net.net, ns.inum);
}

/* The fields every socket has (struct sock_common: full sockets,
 * minisockets and request sockets alike), from its copy c. */
static __always_inline void read_common(struct sock_rec *r, const struct sock_common *c)
{
	struct net *net = c->skc_net.net;

	r->family = c->skc_family;
	r->state = c->skc_state;
	r->sport = c->skc_num;
	r->dport = bpf_ntohs(c->skc_dport);
	r->netns = BPF_CORE_READ(net, ns.inum);
	if (r->family == SOCKITER_AF_INET6) {
		__builtin_memcpy(r->saddr, c->skc_v6_rcv_saddr.in6_u.u6_addr8, 16);
		__builtin_memcpy(r->daddr, c->skc_v6_daddr.in6_u.u6_addr8, 16);
	} else {
		*(__be32 *)r->saddr = c->skc_rcv_saddr;
		*(__be32 *)r->daddr = c->skc_daddr;
	}
}

/* SO_REUSEADDR, SO_REUSEPORT, SO_BINDTODEVICE, from the copy c: set on
 * full sockets and copied to their TIME_WAIT minisockets
 * (inet_twsk_alloc). */
static __always_inline void read_opts(struct sock_rec *r, const struct sock_common *c)
{
	r->reuse = BPF_CORE_READ_BITFIELD(c, skc_reuse);
	if (BPF_CORE_READ_BITFIELD(c, skc_reuseport))
		r->flags |= SOCKITER_F_REUSEPORT;
	r->bound_dev_if = c->skc_bound_dev_if;
	r->flags |= SOCKITER_F_OPTS;
}

/* The bind bucket's fastreuse and fastreuseport: one read when they are
 * neighbours, as in every kernel eaddr knows. */
static __always_inline void read_bucket(struct sock_rec *r, const struct inet_bind_bucket *tb)
{
	if (!tb)
		return;
	if (bpf_core_field_offset(struct inet_bind_bucket, fastreuseport) ==
	    bpf_core_field_offset(struct inet_bind_bucket, fastreuse) + 1) {
		__s8 two[2] = {};
		bpf_core_read(&two, sizeof(two), &tb->fastreuse);
		r->fastreuse = two[0];
		r->fastreuseport = two[1];
	} else {
		r->fastreuse = BPF_CORE_READ(tb, fastreuse);
		r->fastreuseport = BPF_CORE_READ(tb, fastreuseport);
	}
	r->flags |= SOCKITER_F_BUCKET;
}

/* A full socket sk (c its copy): its options, whether it is an orphan,
 * (TCP) its port's bind bucket, and unless lean its file's inode and uid. */
static __always_inline void read_full(struct sock_rec *r, const struct sock *sk, const struct sock_common *c, bool tcp, bool lean)
{
	read_opts(r, c);
	/* sock_orphan() sets SOCK_DEAD as it clears sk_socket. A NULL
	 * sk_socket alone is no orphan: an accept queue's children have none
	 * yet. */
	if (c->skc_flags & (1UL << bpf_core_enum_value(enum sock_flags, SOCK_DEAD)))
		r->flags |= SOCKITER_F_ORPHAN;
	if (tcp)
		read_bucket(r, BPF_CORE_READ((const struct inet_connection_sock *)sk, icsk_bind_hash));
	if (lean)
		return;
	struct socket *sock = BPF_CORE_READ(sk, sk_socket);
	if (sock)
		r->inode = BPF_CORE_READ(sock, file, f_inode, i_ino);
	r->uid = BPF_CORE_READ(sk, sk_uid.val);
}

/* A TIME_WAIT minisocket (an inet_timewait_sock in a tcp_timewait_sock),
 * from its copy c. */
static __always_inline void read_tw(struct sock_rec *r, const struct sock_common *c)
{
	const struct inet_timewait_sock *tw = (const void *)c;
	const struct tcp_timewait_sock *tcptw = (const void *)c;

	r->flags |= SOCKITER_F_TW;
	r->state = tw->tw_substate;
	if (r->state != SOCKITER_TCP_TIME_WAIT)
		r->flags |= SOCKITER_F_ORPHAN; /* an orphan's FIN_WAIT2, as a minisocket */
	read_opts(r, c);
	read_bucket(r, tw->tw_tb);
	r->tw_ts_recent_stamp = tcptw->tw_ts_recent_stamp;
	if (bpf_core_field_exists(tw->tw_entry_stamp)) {
		r->tw_entry_stamp = tw->tw_entry_stamp;
		r->flags |= SOCKITER_F_TW_ENTRY;
	}
}

/* A socket of the TCP hash tables (the established hash, with its
 * TIME_WAIT minisockets and request sockets, and the listening hash), as
 * iter/tcp hands it over: its uid is the socket's own (sk_uid), 0 for a
 * TIME_WAIT one and the listener's for a request socket, as iter/tcp
 * gives it (bpf_iter_tcp_seq_show); lean leaves out the inode and the
 * uid. False when it cannot be read. */
static __always_inline bool read_tcp_hashed(struct sock_rec *r, const struct sock_common *skc, bool lean)
{
	const struct sock_common *c = sock_copy(skc);

	if (!c)
		return false;
	r->source = SOCKITER_SRC_TCP;
	r->proto = SOCKITER_IPPROTO_TCP;
	read_common(r, c);
	if (r->state == SOCKITER_TCP_TIME_WAIT) {
		read_tw(r, c);
	} else if (r->state == SOCKITER_TCP_NEW_SYN_RECV) {
		r->flags |= SOCKITER_F_REQ;
		r->state = SOCKITER_TCP_SYN_RECV; /* as sock_diag and ss show it */
		if (!lean)
			r->uid = BPF_CORE_READ(c->skc_listener, sk_uid.val);
	} else {
		read_full(r, (const struct sock *)skc, c, true, lean);
	}
	return true;
}

/* A UDP socket, as iter/udp hands it over. */
static __always_inline bool read_udp(struct sock_rec *r, const struct sock *sk)
{
	const struct sock_common *c = sock_copy(sk);

	if (!c)
		return false;
	r->source = SOCKITER_SRC_UDP;
	r->proto = BPF_CORE_READ(sk, sk_protocol); /* IPPROTO_UDP or IPPROTO_UDPLITE */
	read_common(r, c);
	read_full(r, sk, c, false, false);
	return true;
}

/* The TCP socket behind file if it holds a port and is in no hash table a
 * walk of them sees: CLOSE with a bind bucket (bound, never listened nor
 * connected, or bound to a port and reset since); NULL otherwise. The
 * state is tested first: most sockets are in none of these. */
static __always_inline const struct sock *bound_only(struct file *file)
{
	struct socket *sock = bpf_sock_from_file(file); /* NULL: no socket file */
	if (!sock)
		return 0;
	const struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_state) != SOCKITER_TCP_CLOSE)
		return 0;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != SOCKITER_AF_INET && family != SOCKITER_AF_INET6)
		return 0;
	if (BPF_CORE_READ(sk, sk_protocol) != SOCKITER_IPPROTO_TCP ||
	    BPF_CORE_READ(sk, sk_type) != SOCKITER_SOCK_STREAM)
		return 0;
	if (!BPF_CORE_READ((const struct inet_connection_sock *)sk, icsk_bind_hash))
		return 0;
	return sk;
}

/* A socket bound_only found. False when it cannot be read. */
static __always_inline bool read_bound_only(struct sock_rec *r, const struct sock *sk, bool lean)
{
	const struct sock_common *c = sock_copy(sk);

	if (!c)
		return false;
	r->source = SOCKITER_SRC_FILE;
	r->proto = SOCKITER_IPPROTO_TCP;
	read_common(r, c);
	read_full(r, sk, c, true, lean);
	return true;
}

#endif /* SOCKREAD_H */
