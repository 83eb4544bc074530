//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * eaddr's socket iterators: one fixed-size record (struct sock_rec) per
 * socket of one network namespace, with what sock_diag does not show and the
 * port rules need: how the port's bind bucket was made (by bind() or by
 * connect()), SO_REUSEADDR/SO_REUSEPORT, SO_BINDTODEVICE, orphans, and the
 * timestamps of TIME_WAIT sockets.
 *
 * iter/tcp and iter/udp walk the hash tables of the netns the iterator was
 * created in (bpf_iter_init_seq_net: the creating thread's netns); they also
 * test target_netns, so a read in the wrong netns yields nothing instead of
 * another netns's sockets. iter/task_file finds the TCP sockets that are only
 * bound (CLOSE, in no table iter/tcp walks) through the files of every task,
 * and keeps those of target_netns.
 *
 * Every read is bpf_probe_read_kernel (BPF_CORE_READ): the context's
 * pointers are cast to the types the socket's state says it is of.
 */
#include "include/sockiter_core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "sockiter.h"
#include "sockread.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct sock_rec) == 80, "struct sock_rec is 80 bytes");
_Static_assert(__builtin_offsetof(struct sock_rec, sport) == 64, "sock_rec has no holes");

/* Force the types into BTF so bpf2go -type can emit them. */
const struct sock_rec *unused_sock_rec __attribute__((unused));
const struct sockiter_enums *unused_sockiter_enums __attribute__((unused));

/* Inode of the netns whose sockets are wanted; set from Go before each
 * read. 0 matches nothing. */
volatile __u32 target_netns = 0;

SEC("iter/tcp")
int sockiter_tcp(struct bpf_iter__tcp *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct sock_common *skc = ctx->sk_common;
	struct sock_rec r = {};

	if (!skc || sk_netns(skc) != target_netns)
		return 0;
	if (!read_tcp_hashed(&r, skc, false))
		return 0;
	r.uid = ctx->uid;
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

SEC("iter/udp")
int sockiter_udp(struct bpf_iter__udp *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	const struct sock *sk = (const void *)ctx->udp_sk;
	struct sock_rec r = {};

	if (!sk || sk_netns(&sk->__sk_common) != target_netns)
		return 0;
	if (!read_udp(&r, sk))
		return 0;
	r.uid = ctx->uid;
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

/* TCP sockets of target_netns that hold a port and are in no table iter/tcp
 * walks: CLOSE with a bind bucket (bound, never listened nor connected, or
 * bound to a port and reset since). Every fd of a socket gives a record;
 * user space keeps one per inode. */
SEC("iter/task_file")
int sockiter_file(struct bpf_iter__task_file *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct file *file = ctx->file;
	struct sock_rec r = {};

	if (!file || !ctx->task)
		return 0;
	const struct sock *sk = bound_only(file);
	if (!sk || sk_netns(&sk->__sk_common) != target_netns)
		return 0;
	if (!read_bound_only(&r, sk, false))
		return 0;
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
