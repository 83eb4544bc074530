//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * For tracer's tests only (TestAsyncErrorTaken; not in eaddr's binary): makes
 * happen, on demand, the moment in which a failing connect's program takes
 * the socket's error before eaddr's async programs look at it.
 * tcp_done_with_error sets the error, changes the state to CLOSE
 * (sock:inet_sock_set_state), then reports the error
 * (sock:inet_sk_error_report); a program that reads SO_ERROR, or calls recv,
 * in between leaves the socket without it. Each program runs before or after
 * eaddr's own on the same tracepoint as it is attached before or after them:
 *
 *   hold_close  (before async_state) holds the target socket's change from
 *               SYN_SENT to CLOSE until the error was taken (released);
 *   hold_enter  (sys_enter_getsockopt) keeps the taker's optval;
 *   hold_exit   (before exit_getsockopt) with late set: once the taker's
 *               getsockopt took the error, releases hold_close and holds
 *               the call's exit, and so exit_getsockopt, until the kernel
 *               has reported the error (reported);
 *   see_exit    (after exit_getsockopt) without late: once the taker's
 *               getsockopt took the error, releases hold_close;
 *   see_report  (after async_error) sets reported.
 *
 * Nothing waits for user space while a hold lasts: the taker is a process
 * of its own on the other CPU, so that no stop of the test process's
 * runtime (its thread on the held CPU cannot reach a safe point) stops it.
 *
 * A hold never lasts longer than HOLD_NS (held says how it ended).
 */
#include "include/eaddr_core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "eaddr.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define HOLD_NS (5ULL * 1000 * 1000 * 1000)

/* How hold_close ended (held). */
enum hold_outcome {
	HOLD_NONE = 0,     /* it did not run for the target */
	HOLD_RELEASED = 1, /* held until the error was taken */
	HOLD_GAVE_UP = 2,  /* HOLD_NS passed first */
	HOLD_TAKER_CPU = 3, /* not held: it ran on the taker's CPU, where the taker could not run */
};

/* Forces the enum into BTF, for bpf2go -type. */
const enum hold_outcome *unused_hold_outcome __attribute__((unused));

/* Set by user space (Collection.Variables) before a connect. */
volatile __u64 target_cookie; /* the socket's cookie (SO_COOKIE) */
volatile __u32 taker_pid;     /* the process that takes the error */
volatile __u32 taker_cpu;     /* the only CPU it runs on */
volatile __u32 late;          /* hold its getsockopt's exit until the report */
/* Set by user space or by these programs. */
volatile __u32 released;      /* the error was taken */
volatile __u32 reported;      /* the kernel reported the error */
volatile __u32 held;          /* enum hold_outcome */
volatile __s32 err_after;     /* the socket's error when hold_close ended: 0, taken */
volatile __u64 optval;        /* the taker's getsockopt optval */

struct syscall_enter_ctx {
	__u64 common;
	long syscall_nr;
	unsigned long args[6];
};

struct syscall_exit_ctx {
	__u64 common;
	long syscall_nr;
	long ret;
};

static long until_released(__u32 i, void *until)
{
	return released || bpf_ktime_get_ns() > *(__u64 *)until;
}

static long until_reported(__u32 i, void *until)
{
	return reported || bpf_ktime_get_ns() > *(__u64 *)until;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(hold_close, const struct sock *sk, int oldstate, int newstate)
{
	if (oldstate != EADDR_TCP_SYN_SENT || newstate != EADDR_TCP_CLOSE || !target_cookie ||
	    bpf_get_socket_cookie((struct sock *)sk) != target_cookie)
		return 0;
	if (bpf_get_smp_processor_id() == taker_cpu) {
		held = HOLD_TAKER_CPU;
		return 0;
	}
	__u64 until = bpf_ktime_get_ns() + HOLD_NS;
	for (int i = 0; i < 64 && !released && bpf_ktime_get_ns() <= until; i++)
		bpf_loop(1 << 20, until_released, &until, 0);
	held = released ? HOLD_RELEASED : HOLD_GAVE_UP;
	err_after = sk->sk_err;
	return 0;
}

static __always_inline bool taker(void)
{
	return taker_pid && bpf_get_current_pid_tgid() >> 32 == taker_pid;
}

/* The taker's getsockopt returned an error it took. */
static __always_inline bool took(struct syscall_exit_ctx *ctx)
{
	int err = 0;
	return taker() && ctx->ret == 0 && !bpf_probe_read_user(&err, sizeof(err), (const void *)optval) && err > 0;
}

SEC("tracepoint/syscalls/sys_enter_getsockopt")
int hold_enter(struct syscall_enter_ctx *ctx)
{
	if (taker())
		optval = ctx->args[3];
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_getsockopt")
int see_exit(struct syscall_exit_ctx *ctx)
{
	if (!late && took(ctx))
		released = 1;
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_getsockopt")
int hold_exit(struct syscall_exit_ctx *ctx)
{
	if (!late || !took(ctx))
		return 0;
	released = 1;
	__u64 until = bpf_ktime_get_ns() + HOLD_NS;
	for (int i = 0; i < 64 && !reported && bpf_ktime_get_ns() <= until; i++)
		bpf_loop(1 << 20, until_reported, &until, 0);
	return 0;
}

SEC("tp_btf/inet_sk_error_report")
int BPF_PROG(see_report, const struct sock *sk)
{
	if (target_cookie && bpf_get_socket_cookie((struct sock *)sk) == target_cookie)
		reported = 1;
	return 0;
}
