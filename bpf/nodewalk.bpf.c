//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The node walk: every TCP socket of every network namespace in one pass,
 * for the port sampler. iter/tcp cannot do that: it walks the node-wide
 * hash tables and hands a program only the sockets of the netns that made
 * the iterator (bpf_iter_tcp_batch: seq_sk_match, net_eq), so a read per
 * netns costs every socket of the node, netns times over. Here three
 * iterators are read in turn:
 *
 *   nodewalk_tasks  (iter/task)       each process and its netns; each netns's
 *                                     port settings, read from its struct net
 *   nodewalk_files  (iter/task_file)  the TCP sockets that are only bound
 *                                     (CLOSE, holding a port): in no hash table
 *   nodewalk_hash   (iter/task, a chunk of buckets per task object) the
 *                                     listening hash (lhash2) and the
 *                                     established hash (ehash, with TIME_WAIT
 *                                     and request sockets)
 *
 * The hash tables are those of the reader's netns (tcp_death_row.hashinfo),
 * which every netns shares unless it was made with its own
 * (net.ipv4.tcp_child_ehash_entries): the task walk flags those, and user
 * space reads them apart. The chains are read as the kernel's own lockless
 * lookups read them (__inet_lookup_established, __inet_lookup_listener):
 * under RCU (an iterator program runs in rcu_read_lock), the sockets being
 * SLAB_TYPESAFE_BY_RCU; a chain that does not end in its own bucket's nulls
 * value was changed under the walk, and is read again (up to twice more,
 * then counted as cut). A chunk's records are buffered and written once the
 * chunk is read, so that a chain read again is not written twice, and the
 * kernel may show an object again into an empty buffer (bpf_seq_read)
 * without loss: the programs keep no state across objects but the netns
 * already seen in this walk, keyed by the task that saw them.
 */
#include "include/sockiter_core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "sockiter.h"
#include "sockread.h"
#include "nodewalk.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct nodewalk_member) == 16, "nodewalk_member is 16 bytes");
_Static_assert(sizeof(struct nodewalk_netns) == 32, "nodewalk_netns is 32 bytes");
_Static_assert(sizeof(struct nodewalk_reserved) == 8 + 8 * NODEWALK_RESERVED_WORDS, "nodewalk_reserved has no holes");
_Static_assert((NODEWALK_CHUNK_RECS + 2) * sizeof(struct sock_rec) <= 8 * 4096,
	       "a chunk's output fits in bpf_seq_read's buffer");

const struct nodewalk_member *unused_nodewalk_member __attribute__((unused));
const struct nodewalk_netns *unused_nodewalk_netns __attribute__((unused));
const struct nodewalk_reserved *unused_nodewalk_reserved __attribute__((unused));
const struct nodewalk_enums *unused_nodewalk_enums __attribute__((unused));

/* Set from Go before each walk: a netns's settings are written once per
 * walk (nodewalk_seen). */
volatile __u64 walk_gen = 0;

/* Set from Go before each read of the hash walk: the chunk the first task
 * object reads, the buckets of a chunk, the bucket the walk ends before
 * (0: the last one). */
volatile __u32 chunk_base = 0;
volatile __u32 chunk_buckets = 64;
volatile __u32 chunk_end = 0;

/* The records a chunk buffers before it stops, at most (and 0 for)
 * NODEWALK_CHUNK_RECS: tests make it small to read chunks again. */
volatile __u32 chunk_recs = 0;

/* Set from Go: leave out each socket's inode and uid (three and one probe
 * reads), which the port sampler does not use. */
volatile bool lean = false;

#define PF_KTHREAD 0x00200000         /* include/linux/sched.h */
#define LISTENING_NULLS_BASE (1U << 29) /* include/net/inet_hashtables.h */

struct seen {
	__u64 gen;
	__u64 task; /* the task whose object wrote the netns's settings */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct seen);
} nodewalk_seen SEC(".maps");

struct chunk_buf {
	struct sock_rec recs[NODEWALK_CHUNK_RECS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct chunk_buf);
} nodewalk_chunk_buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nodewalk_reserved);
} nodewalk_reserved_buf SEC(".maps");

/* The TCP hash tables of the reader's netns. */
static __always_inline struct inet_hashinfo *reader_hashinfo(void)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	return BPF_CORE_READ(cur, nsproxy, net_ns, ipv4.tcp_death_row.hashinfo);
}

/* The pid of task in the reader's pid namespace: the one iter/task walks
 * and /proc shows (struct pid's numbers[level of the reader's]). */
static __always_inline __u32 reader_pid(struct task_struct *task)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	unsigned int level = BPF_CORE_READ(cur, thread_pid, level);
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	int nr = 0;

	if (!pid || level > 64)
		return 0;
	bpf_core_read(&nr, sizeof(nr), (void *)pid + bpf_core_field_offset(struct pid, numbers) +
						level * bpf_core_type_size(struct upid) +
						bpf_core_field_offset(struct upid, nr));
	return nr;
}

/* ip_local_port_range: int range[2] up to 6.7, one u32 (high << 16 | low)
 * since. */
static __always_inline void read_range(struct nodewalk_netns *n, struct net *net)
{
	if (bpf_core_field_size(net->ipv4.ip_local_ports.range) == 8) {
		int r[2] = {};
		bpf_core_read(&r, sizeof(r), &net->ipv4.ip_local_ports.range);
		n->port_lo = r[0];
		n->port_hi = r[1];
	} else {
		__u32 r = 0;
		bpf_core_read(&r, sizeof(r), &net->ipv4.ip_local_ports.range);
		n->port_lo = r & 0xffff;
		n->port_hi = r >> 16;
	}
}

/* Writes net's settings and reserved ports, once per walk: again only when
 * the kernel shows the same task's object again (into an empty buffer,
 * after the first one did not fit). */
static __always_inline void write_netns(struct seq_file *seq, struct task_struct *task, struct net *net, __u32 inum)
{
	struct seen *s = bpf_map_lookup_elem(&nodewalk_seen, &inum);
	if (s && s->gen == walk_gen && s->task != (__u64)task)
		return;
	struct seen now = {.gen = walk_gen, .task = (__u64)task};
	bpf_map_update_elem(&nodewalk_seen, &inum, &now, BPF_ANY);

	struct nodewalk_netns n = {.kind = NODEWALK_NETNS, .netns = inum};
	read_range(&n, net);
	n.unpriv_start = BPF_CORE_READ(net, ipv4.sysctl_ip_prot_sock);
	n.tw_reuse = BPF_CORE_READ(net, ipv4.sysctl_tcp_tw_reuse);
	if (bpf_core_field_exists(net->ipv4.sysctl_tcp_tw_reuse_delay)) {
		n.tw_reuse_delay = BPF_CORE_READ(net, ipv4.sysctl_tcp_tw_reuse_delay);
		n.flags |= NODEWALK_F_TW_DELAY;
	}
	if (BPF_CORE_READ(net, ipv4.tcp_death_row.hashinfo) != reader_hashinfo())
		n.flags |= NODEWALK_F_OWN_EHASH;
	bpf_seq_write(seq, &n, sizeof(n));

	__u32 zero = 0;
	struct nodewalk_reserved *r = bpf_map_lookup_elem(&nodewalk_reserved_buf, &zero);
	if (!r)
		return;
	r->kind = NODEWALK_RESERVED;
	r->netns = inum;
	/* On a failure (no bitmap) the helper zeroes r->bits: none reserved. */
	bpf_probe_read_kernel(r->bits, sizeof(r->bits), BPF_CORE_READ(net, ipv4.sysctl_local_reserved_ports));
	bpf_seq_write(seq, r, sizeof(*r));
}

SEC("iter/task")
int nodewalk_tasks(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;

	if (!task)
		return 0;
	if (BPF_CORE_READ(task, pid) != BPF_CORE_READ(task, tgid))
		return 0; /* a thread: /proc lists the leader's netns */
	struct net *net = BPF_CORE_READ(task, nsproxy, net_ns);
	if (!net)
		return 0; /* exiting */
	struct nodewalk_member m = {.kind = NODEWALK_MEMBER, .netns = BPF_CORE_READ(net, ns.inum),
				    .pid = reader_pid(task)};
	if (BPF_CORE_READ(task, flags) & PF_KTHREAD)
		m.flags |= NODEWALK_F_KTHREAD;
	bpf_seq_write(seq, &m, sizeof(m));
	write_netns(seq, task, net, m.netns);
	return 0;
}

/* The TCP sockets of every netns that are only bound: in no hash table. A
 * socket behind several fds gives a record per fd. */
SEC("iter/task_file")
int nodewalk_files(struct bpf_iter__task_file *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct file *file = ctx->file;
	struct sock_rec r = {};

	if (!file || !ctx->task)
		return 0;
	const struct sock *sk = bound_only(file);
	if (!sk)
		return 0;
	if (!read_bound_only(&r, sk, lean))
		return 0;
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

/* One chunk of the hash walk in progress (bpf_loop's context). */
struct walk {
	struct chunk_buf *buf;
	__u64 ehash, lhash2;   /* the tables' bucket arrays */
	__u32 lsize;           /* listening buckets (lhash2 comes first) */
	__u32 bucket, end;     /* the bucket being read, the chunk's end */
	__u64 node;            /* the chain's next node; 0: the bucket not started */
	__u32 n, chain_start;  /* records buffered; the current chain's first */
	__u32 attempts;        /* reads of the current chain that changed under it */
	bool stopped;          /* buckets [bucket, end) are left to be read again */
};

/* The nulls value the chain of bucket b ends with (INIT_HLIST_NULLS_HEAD
 * in inet_hashinfo2_init_mod and tcp_init / inet_pernet_hashinfo_alloc). */
static __always_inline __u32 chain_nulls(const struct walk *w, __u32 b)
{
	return b < w->lsize ? b + LISTENING_NULLS_BASE : b - w->lsize;
}

/* The first node of bucket b; 0 when it cannot be read. */
static __always_inline __u64 chain_head(const struct walk *w, __u32 b)
{
	__u64 addr, head = 0;

	if (b < w->lsize)
		addr = w->lhash2 + (__u64)b * bpf_core_type_size(struct inet_listen_hashbucket) +
		       bpf_core_field_offset(struct inet_listen_hashbucket, nulls_head);
	else
		addr = w->ehash + (__u64)(b - w->lsize) * bpf_core_type_size(struct inet_ehash_bucket) +
		       bpf_core_field_offset(struct inet_ehash_bucket, chain);
	bpf_probe_read_kernel(&head, sizeof(head), (void *)addr);
	return head;
}

/* The chunk stops at the current chain: its records are dropped, and it and
 * the chunk's other buckets are left to be read again, one by one. */
static __always_inline long stop_chunk(struct walk *w)
{
	w->n = w->chain_start;
	w->stopped = true;
	return 1;
}

/* The end of a chain: kept when it ends in its own bucket's nulls value,
 * else read again (a socket on it moved to another chain meanwhile), at
 * most twice, then the chunk stops there. */
static __always_inline long end_chain(struct walk *w)
{
	if ((w->node >> 1) != chain_nulls(w, w->bucket)) {
		if (++w->attempts > 2)
			return stop_chunk(w);
		w->n = w->chain_start;
		w->node = 0;
		return 0;
	}
	w->attempts = 0;
	w->node = 0;
	w->bucket++;
	return 0;
}

/* One step of the walk: start a bucket, read one socket, or end a chain.
 * 1 stops the loop: the chunk is read, or stopped (its buffer full, or a
 * chain that cannot be read). */
static long walk_step(__u32 i, void *ctx)
{
	struct walk *w = ctx;

	if (w->bucket >= w->end)
		return 1;
	if (!w->node) {
		w->chain_start = w->n;
		w->node = chain_head(w, w->bucket);
		if (!w->node) /* unreadable: never so for a live table */
			return stop_chunk(w);
	}
	if (w->node & 1)
		return end_chain(w);
	__u32 n = w->n;
	if (n >= NODEWALK_CHUNK_RECS || (chunk_recs && n >= chunk_recs))
		return stop_chunk(w);
	/* Locals only inside BPF_CORE_READ: it relocates every member access
	 * of its expression against the kernel's types. */
	struct hlist_nulls_node *node = (void *)w->node;
	const struct sock_common *skc = (const void *)node - bpf_core_field_offset(struct sock_common, skc_nulls_node);
	struct sock_rec *r = &w->buf->recs[n];
	__builtin_memset(r, 0, sizeof(*r));
	if (!read_tcp_hashed(r, skc, lean))
		return stop_chunk(w);
	w->n = n + 1;
	w->node = (__u64)BPF_CORE_READ(node, next);
	if (!w->node)
		return stop_chunk(w);
	return 0;
}

/* A chunk of the TCP hash tables per task object: iter/task is only the
 * clock of the walk here (the iterators over a map's elements are refused
 * where eaddr must run), object seq_num reading buckets
 * [(chunk_base + seq_num) * chunk_buckets, + chunk_buckets) of lhash2
 * then ehash, up to chunk_end (0: the last). The kernel shows an object
 * again with the same seq_num when its output did not fit (bpf_seq_read),
 * so a chunk is read again whole. After each chunk a CHUNK marker, after a
 * chunk that stopped a CUT marker naming the buckets left; the chunk past
 * the end writes END. User space reads again from the next chunk while
 * there are more chunks than tasks, and the buckets left one by one. */
SEC("iter/task")
int nodewalk_hash(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	__u32 zero = 0;

	if (!ctx->task)
		return 0;
	struct inet_hashinfo *h = reader_hashinfo();
	if (!h)
		return 0;
	struct walk w = {};
	w.buf = bpf_map_lookup_elem(&nodewalk_chunk_buf, &zero);
	if (!w.buf)
		return 0;
	w.ehash = (__u64)BPF_CORE_READ(h, ehash);
	w.lhash2 = (__u64)BPF_CORE_READ(h, lhash2);
	w.lsize = BPF_CORE_READ(h, lhash2_mask) + 1;
	__u32 total = w.lsize + BPF_CORE_READ(h, ehash_mask) + 1;
	if (chunk_end && chunk_end < total)
		total = chunk_end;
	__u32 per = chunk_buckets ? chunk_buckets : 1;
	__u64 chunk = chunk_base + ctx->meta->seq_num;
	__u64 first = chunk * per;
	struct sock_rec m = {.source = SOCKITER_SRC_CHUNK, .inode = chunk};
	if (first >= total) {
		if (first - total < per) { /* the first chunk past the end */
			m.source = SOCKITER_SRC_END;
			m.inode = w.lsize + BPF_CORE_READ(h, ehash_mask) + 1;
			bpf_seq_write(seq, &m, sizeof(m));
		}
		return 0;
	}
	w.bucket = first;
	w.end = first + per < total ? first + per : total;
	bpf_loop(4 * per + 3 * NODEWALK_CHUNK_RECS + 16, walk_step, &w, 0);
	__u32 n = w.n;
	if (n > NODEWALK_CHUNK_RECS)
		n = NODEWALK_CHUNK_RECS;
	if (n)
		bpf_seq_write(seq, w.buf->recs, n * sizeof(struct sock_rec));
	if (w.bucket < w.end) { /* stopped, or the loop's steps ran out */
		struct sock_rec c = {.source = SOCKITER_SRC_CUT, .netns = w.bucket, .inode = w.end - w.bucket};
		bpf_seq_write(seq, &c, sizeof(c));
	}
	bpf_seq_write(seq, &m, sizeof(m));
	return 0;
}
