//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * eaddr: report failed connect() and bind() calls.
 *
 * Two programs on the exit tracepoints of connect(2) and bind(2). The return
 * value is tested first, so a successful call costs one compare. Arguments are
 * read back from the task's saved user registers (bpf_task_pt_regs), so there
 * is no enter hook and no per-call map.
 *
 * With async_on, a connect() that returns EINPROGRESS is kept as the event it
 * would be (map pending, by socket) and reported when the socket fails
 * (sock:inet_sk_error_report, or its SYN_SENT -> CLOSE state change with an
 * error), or forgotten when it leaves SYN_SENT without one.
 *
 * With ended_on, a TCP connect that leaves SYN_SENT for CLOSE with an error
 * records its source address and port by socket cookie (map conn_ends): the
 * kernel has released them by then, and a blocking connect()'s exit reads
 * them there. The port is chosen after the socket enters SYN_SENT
 * (tcp_v4_connect: tcp_set_state, then inet_hash_connect), so it is read at
 * the end, from inet_sport, which the release leaves set; only failing
 * connects pay for it. Entering SYN_SENT only makes the socket's cookie,
 * which the exit of connect() (a classic tracepoint) can read but not make.
 */
#include "include/eaddr_core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "eaddr.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space through spec.Variables before load. */
/* Bit N set: report errno N. Word 1 bits 34 and 35 are EADDRINUSE (98) and EADDRNOTAVAIL (99). */
const volatile __u64 errno_mask[4] = {1ULL << 11, (1ULL << (EADDR_EADDRINUSE - 64)) | (1ULL << (EADDR_EADDRNOTAVAIL - 64)), 0, 0};
const volatile bool all_errnos = false;   /* every failure except EINPROGRESS */
/* Bit N set: errno N (also in errno_mask) is reported only from a UDP or
 * UDP-Lite socket (--errno EAGAIN/udp). Bit 11 is EAGAIN: a UDP socket's
 * autobind found no free port; for unix and TCP it means other things. */
const volatile __u64 udp_only_mask[4] = {1ULL << 11, 0, 0, 0};
const volatile __u32 filter_tgid = 0;     /* 0: any process */
const volatile __u32 filter_netns = 0;    /* 0: any netns */
/* Wake the reader only once this many bytes wait in the ring (user space
 * also reads on a short timer). A wakeup per event costs several us per
 * failing call; 0 wakes it for every event. */
const volatile __u64 wakeup_bytes = 0;
/* --nodeport-collisions: report a connect() in netns nodeport_netns whose
 * kernel-chosen source port is in [nodeport_lo, nodeport_hi]. Off, the
 * verifier removes the code: a successful connect() still costs one test. */
const volatile bool nodeport_on = false;
const volatile __u32 nodeport_netns = 0;
const volatile __u16 nodeport_lo = 30000;
const volatile __u16 nodeport_hi = 32767;
/* --rate-limit: a key may pass once every limit_interval_ns, with bursts of
 * up to limit_tolerance_ns / limit_interval_ns + 1 (GCRA). 0: no limit, and
 * the verifier removes the code. */
const volatile __u64 limit_interval_ns = 0;
const volatile __u64 limit_tolerance_ns = 0;
/* --rate-limit-cgroup: the same for a cgroup's bucket (struct
 * cgroup_limit_key), with the rate limit on; 0: no such bucket, and the
 * verifier removes the code. */
const volatile __u64 cg_interval_ns = 0;
const volatile __u64 cg_tolerance_ns = 0;
/* The limit's clock: jiffies times this, the length of a jiffy in ns (1e9 /
 * HZ), which user space measures while the programs load and sets before it
 * attaches them (tracer/hz.go); 0: bpf_ktime_get_boot_ns, when HZ could not
 * be told for sure. GCRA at 100/s needs milliseconds: bpf_jiffies64 is one
 * load (the verifier inlines it), the fine clock a helper call and a
 * clocksource read (kvm-clock in a guest), on every suppressed failure. */
__u64 limit_tick_ns = 0;
/* Report non-blocking connects that fail later (their errno wanted). */
const volatile bool async_on = false;
/* Record how failing TCP connects ended (conn_ends): some socket error
 * (ECONNREFUSED, ETIMEDOUT, ...) is wanted. */
const volatile bool ended_on = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* Per CPU: [EADDR_LOST_RING] events dropped because the ring buffer was
 * full; [EADDR_LOST_UNSEEN] pending connects whose end neither async
 * program saw (async_destroy). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EADDR_LOST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* cgroup id -> its path, written the first time a cgroup fails (LRU). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EADDR_CGROUP_PATHS);
	__type(key, __u64);
	__type(value, struct cgroup_path);
} cgroup_paths SEC(".maps");

/* Where a cgroup_path is built: too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cgroup_path);
} cgroup_scratch SEC(".maps");

/* The rate limit's buckets (bpf/eaddr.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EADDR_LIMIT_KEYS);
	__type(key, struct limit_key);
	__type(value, struct limit_state);
} limits SEC(".maps");

/* Limit key id -> failures held back, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, EADDR_LIMIT_KEYS);
	__type(key, __u64);
	__type(value, __u64);
} limit_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct limit_cpu);
} limit_cpus SEC(".maps");

/* The cgroups' buckets: key -> tat (bpf/eaddr.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EADDR_CGROUP_LIMITS);
	__type(key, struct cgroup_limit_key);
	__type(value, __u64);
} cgroup_limits SEC(".maps");

/* A cgroup's bucket -> failures it held back, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, EADDR_CGROUP_LIMITS);
	__type(key, struct cgroup_limit_key);
	__type(value, __u64);
} cgroup_counts SEC(".maps");

/* (tgid, start, exec) -> the program's identity, sent once (bpf/eaddr.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EADDR_PROCS);
	__type(key, struct proc_key);
	__type(value, struct proc_facts);
} procs SEC(".maps");

/* How much of a kept connect's end the async programs saw. */
enum pending_end {
	PENDING_OPEN = 0, /* nothing yet */
	/* It left SYN_SENT for CLOSE with no error on the socket: its program's
	 * close(), a disconnect (connect() with AF_UNSPEC, shutdown(): the
	 * report of ECONNRESET follows), or a failure whose error its program
	 * took with SO_ERROR, which takes no lock, between the kernel's setting
	 * it and the change (tcp_done_with_error: the report follows, the error
	 * gone; recv and send wait for the socket's lock, which the kernel
	 * holds). */
	PENDING_QUIET = 1,
	/* Then the kernel reported an error the socket no longer held: its
	 * program took it, and it is the connect's. */
	PENDING_TAKEN = 2,
};

/* A connect() that returned EINPROGRESS, kept until its end. */
struct pending_conn {
	struct event ev; /* the event it will be */
	__s32 taken;     /* the error its program read with SO_ERROR while kept; 0 if none */
	__u32 end;       /* enum pending_end */
};

/* Socket -> its pending connect (LRU). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EADDR_PENDING);
	__type(key, __u64);
	__type(value, struct pending_conn);
} pending SEC(".maps");

/* Sockets whose pending connect was reported, with the errno: a program
 * that calls connect() again on it gets the same error back, and that
 * failure was reported already. A socket's entry goes when it starts
 * another connect (-> SYN_SENT): the memory of a closed socket is reused by
 * new ones, whose own failures must not be taken for it (LRU: only the
 * latest matter). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __s32);
} async_done SEC(".maps");

/* Socket cookie -> the source address and port of its failed connect (bpf/eaddr.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EADDR_CONN_ENDS);
	__type(key, __u64);
	__type(value, struct conn_end);
} conn_ends SEC(".maps");

/* Where a pending connect is built: too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pending_conn);
} pending_scratch SEC(".maps");

/* Force the types into BTF so bpf2go -type can emit them. */
const struct event *unused_event __attribute__((unused));
const struct cgroup_path *unused_cgroup_path __attribute__((unused));
const struct eaddr_enums *unused_enums __attribute__((unused));
const struct limit_key *unused_limit_key __attribute__((unused));
const struct limit_state *unused_limit_state __attribute__((unused));
const struct limit_cpu *unused_limit_cpu __attribute__((unused));
const struct cgroup_limit_key *unused_cgroup_limit_key __attribute__((unused));
const struct proc_key *unused_proc_key __attribute__((unused));
const struct proc_facts *unused_proc_facts __attribute__((unused));

/* The tracepoint format of sys_exit_*: common header, syscall nr, ret. */
struct syscall_exit_ctx {
	__u64 common;
	long syscall_nr;
	long ret;
};

static __always_inline bool wanted(long ret)
{
	if (ret >= 0)
		return false;
	__u32 err = (__u32)-ret;
	if (all_errnos)
		return err != EADDR_EINPROGRESS && (err < EADDR_ERESTARTSYS || err > EADDR_ERESTART_RESTARTBLOCK);
	if (err >= 256)
		return false;
	__u32 word = err >> 6;
	barrier_var(word); /* keep clang from re-deriving the index unbounded */
	return errno_mask[word & 3] & (1ULL << (err & 63));
}

static __always_inline void count_in(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &slot);
	if (n)
		*n += 1; /* per-CPU slot: no other writer */
}

static __always_inline void count_lost(void)
{
	count_in(EADDR_LOST_RING);
}

static __always_inline __u64 net_cookie(struct net *net)
{
	if (bpf_core_field_exists(net->net_cookie))
		return BPF_CORE_READ(net, net_cookie);
	return 0;
}

/* The socket behind fd in task's table, or NULL when fd is no socket. */
static __always_inline struct sock *fd_sock(struct task_struct *task, int fd)
{
	struct fdtable *fdt = task->files->fdt; /* BTF pointers: plain loads */
	struct file **fds = fdt->fd;
	unsigned int max = fdt->max_fds;
	struct file *f = 0;

	if (fd < 0 || (unsigned int)fd >= max)
		return 0;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	if (!f)
		return 0;
	struct socket *sock = BPF_CORE_READ(f, private_data);
	if (!sock)
		return 0;
	/* private_data is a struct socket only for socket files: check the back pointer. */
	if (BPF_CORE_READ(sock, file) != f)
		return 0;
	return BPF_CORE_READ(sock, sk);
}

#define EADDR_IPPROTO_UDP 17
#define EADDR_IPPROTO_UDPLITE 136

static __always_inline bool udp_only(__u32 err)
{
	if (err >= 256)
		return false;
	__u32 word = err >> 6;
	barrier_var(word);
	return udp_only_mask[word & 3] & (1ULL << (err & 63));
}

/* A wanted failure (ret) that udp_only_mask keeps for UDP sockets is from
 * one: the fd's socket is read only for such an errno. */
static __always_inline bool proto_wanted(long ret)
{
	if (!udp_only((__u32)-ret))
		return true;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct sock *sk = fd_sock(task, (int)PT_REGS_PARM1_CORE_SYSCALL(regs));
	if (!sk)
		return false;
	__u16 proto = BPF_CORE_READ(sk, sk_protocol);
	return proto == EADDR_IPPROTO_UDP || proto == EADDR_IPPROTO_UDPLITE;
}

static __always_inline bool handshake_err(int err)
{
	return err == EADDR_ETIMEDOUT || err == EADDR_ECONNREFUSED || err == EADDR_EHOSTUNREACH || err == EADDR_ENETUNREACH;
}

/* A failed connect's source address and port, which the kernel released
 * (conn_ends), when the entry is for this failure (the same errno: an
 * entry of an earlier connect of the socket is not). The entry goes. */
static __always_inline void fill_ended(struct event *e)
{
	__u64 key = e->sock_cookie;
	if (!key)
		return;
	struct conn_end *c = bpf_map_lookup_elem(&conn_ends, &key);
	if (!c)
		return;
	if (c->err == e->err && c->family == e->sock_family) {
		__builtin_memcpy(e->local_addr, c->local_addr, sizeof(e->local_addr));
		e->local_port = c->local_port;
		e->flags |= EADDR_F_RELEASED;
	}
	bpf_map_delete_elem(&conn_ends, &key);
}

static __always_inline void read_socket(struct event *e, struct task_struct *task, int fd)
{
	struct sock *sk = fd_sock(task, fd);
	if (!sk)
		return;

	e->flags |= EADDR_F_SOCKET;
	e->sock_family = BPF_CORE_READ(sk, __sk_common.skc_family);
	e->sock_type = BPF_CORE_READ(sk, sk_type);
	e->sock_protocol = BPF_CORE_READ(sk, sk_protocol);
	struct net *net = BPF_CORE_READ(sk, __sk_common.skc_net.net);
	e->netns = BPF_CORE_READ(net, ns.inum);
	e->netns_cookie = net_cookie(net);
	e->local_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	if (e->sock_family == EADDR_AF_INET6)
		BPF_CORE_READ_INTO(&e->local_addr, sk, __sk_common.skc_v6_rcv_saddr);
	else /* all four bytes: BPF_CORE_READ_INTO copies sizeof(*dst) */
		BPF_CORE_READ_INTO((__u32 *)e->local_addr, sk, __sk_common.skc_rcv_saddr);
	e->sock_cookie = BPF_CORE_READ(sk, __sk_common.skc_cookie.counter);
	/* A handshake's failure (not a pending connect's event, not a storm of
	 * EADDRNOTAVAIL: no lookup for those) on a socket that no longer has a
	 * port: the kernel released it. */
	if (ended_on && handshake_err(e->err) && !e->local_port && e->sock_protocol == EADDR_IPPROTO_TCP)
		fill_ended(e);
}

/* The task's cgroup v2 id: what bpf_get_current_cgroup_id returns
 * (task_dfl_cgroup, then cgroup_id: kn->id), read through BTF pointers
 * without the helper's call, which costs a suppressed failure more than
 * the four loads (the programs run under RCU, as the helper's lock is). */
static __always_inline __u64 task_cgroup_id(struct task_struct *task)
{
	return task->cgroups->dfl_cgrp->kn->id;
}

static __always_inline struct kernfs_node *kn_parent(struct kernfs_node *kn)
{
	if (bpf_core_field_exists(kn->__parent))
		return BPF_CORE_READ(kn, __parent);
	return BPF_CORE_READ((struct kernfs_node___pre615 *)kn, parent);
}

/* Names the task's cgroup v2 directory in cgroup_paths, once per cgroup: a
 * hash lookup when it is known, a walk of at most EADDR_CGROUP_DEPTH kernfs
 * names the first time. User space reads it when it meets a new cgroup id,
 * which works after the cgroup is gone (pods fail in their first second and
 * are removed in the next). */
static __always_inline void record_cgroup(struct task_struct *task, __u64 id)
{
	if (bpf_map_lookup_elem(&cgroup_paths, &id))
		return;
	__u32 zero = 0;
	struct cgroup_path *p = bpf_map_lookup_elem(&cgroup_scratch, &zero);
	if (!p)
		return;
	struct kernfs_node *kn = task->cgroups->dfl_cgrp->kn;
	if (!kn || BPF_CORE_READ(kn, id) != id)
		return; /* moved between the helper and here: leave it to user space */
	p->depth = 0;
	p->flags = 0;
	for (int i = 0; i < EADDR_CGROUP_DEPTH; i++) {
		struct kernfs_node *parent = kn_parent(kn);
		if (!parent)
			break; /* kn is the root: it has no name in the path */
		const char *name = BPF_CORE_READ(kn, name);
		long n = bpf_probe_read_kernel_str(p->names[i], EADDR_CGROUP_NAME_MAX, name);
		if (n < 0)
			return;
		if (n == EADDR_CGROUP_NAME_MAX)
			p->flags |= EADDR_CG_LONG;
		p->depth = i + 1;
		kn = parent;
	}
	if (p->depth == EADDR_CGROUP_DEPTH && kn_parent(kn))
		p->flags |= EADDR_CG_DEEP;
	bpf_map_update_elem(&cgroup_paths, &id, p, BPF_NOEXIST);
}

/* The executable's identity and the start of argv, so user space can tell
 * which program failed even after it has exited. */
static __always_inline void read_exe(struct event *e, struct task_struct *task)
{
	struct mm_struct *mm = task->mm; /* BTF pointers from here: plain loads */
	e->exe_ino = 0;
	e->exe_dev = 0;
	e->args_len = 0;
	e->exe_name[0] = 0;
	if (!mm)
		return;
	struct file *exe = mm->exe_file;
	if (exe) {
		e->exe_ino = exe->f_inode->i_ino;
		e->exe_dev = exe->f_inode->i_sb->s_dev;
		const unsigned char *name = exe->f_path.dentry->d_name.name;
		bpf_probe_read_kernel_str(e->exe_name, sizeof(e->exe_name), name);
	}
	unsigned long start = mm->arg_start;
	unsigned long end = mm->arg_end;
	__u64 n = end > start ? end - start : 0;
	if (n > sizeof(e->args))
		n = sizeof(e->args);
	barrier_var(n); /* keep the bound check below where the verifier sees it */
	if (n == 0 || n > sizeof(e->args))
		return;
	if (bpf_probe_read_user(e->args, n, (const void *)start) == 0)
		e->args_len = n;
}

/* The program's identity once per process and program: later events of the
 * same proc_key say it was sent (the ring keeps their order: this event was
 * reserved before the key was recorded, so it is read first). */
static __always_inline void proc_facts(struct event *e, struct task_struct *task, bool remember)
{
	struct proc_key k = {.tgid = e->tgid, .start_boottime = e->start_boottime, .exec_id = e->exec_id};
	if (bpf_map_lookup_elem(&procs, &k)) {
		e->flags |= EADDR_F_PROC_SENT;
		e->exe_ino = 0;
		e->exe_dev = 0;
		e->args_len = 0;
		e->exe_name[0] = 0;
		return;
	}
	read_exe(e, task);
	if (!remember)
		return;
	struct proc_facts f = {.exe_ino = e->exe_ino, .exe_dev = e->exe_dev, .args_len = e->args_len};
	__builtin_memcpy(f.exe_name, e->exe_name, sizeof(f.exe_name));
	__builtin_memcpy(f.args, e->args, sizeof(f.args));
	bpf_map_update_elem(&procs, &k, &f, BPF_ANY);
}

static __always_inline int emit(struct syscall_exit_ctx *ctx, __u8 syscall, struct sock *nodeport);

static __always_inline int report(struct syscall_exit_ctx *ctx, __u8 syscall)
{
	if (!wanted(ctx->ret) || !proto_wanted(ctx->ret))
		return 0;
	return emit(ctx, syscall, 0);
}

/* The kernel chose the source port at connect() time, also for a
 * non-blocking connect that returned EINPROGRESS. */
static __always_inline int nodeport_check(struct syscall_exit_ctx *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (BPF_CORE_READ(task, nsproxy, net_ns, ns.inum) != nodeport_netns)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	int fd = (int)PT_REGS_PARM1_CORE_SYSCALL(regs);
	struct sock *sk = fd_sock(task, fd);
	if (!sk)
		return 0;
	__u16 port = BPF_CORE_READ(sk, __sk_common.skc_num);
	if (port < nodeport_lo || port > nodeport_hi)
		return 0;
	return emit(ctx, EADDR_SYS_CONNECT, sk);
}

/* The limit key's address from the sockaddr the caller passed: only the
 * family and the IP, read from user memory once it is known to be needed. */
static __always_inline void key_addr(struct limit_key *k, const void *uaddr, int addrlen)
{
	struct {
		__u16 family;
		__u16 port;
		__u8 v4[4];
	} h;
	if (!uaddr || addrlen < 16 || bpf_probe_read_user(&h, sizeof(h), uaddr))
		return;
	if (h.family == EADDR_AF_INET) {
		k->family = EADDR_AF_INET;
		__builtin_memcpy(k->addr, h.v4, sizeof(h.v4));
	} else if (h.family == EADDR_AF_INET6 && addrlen >= 24 &&
		   bpf_probe_read_user(k->addr, 16, (const char *)uaddr + 8) == 0) {
		k->family = EADDR_AF_INET6;
	}
}

/* The NodePort report's key: the source address the kernel chose. */
static __always_inline void key_local(struct limit_key *k, struct sock *sk)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == EADDR_AF_INET6) {
		BPF_CORE_READ_INTO(&k->addr, sk, __sk_common.skc_v6_rcv_saddr);
		k->family = EADDR_AF_INET6;
	} else if (family == EADDR_AF_INET) {
		BPF_CORE_READ_INTO((__u32 *)k->addr, sk, __sk_common.skc_rcv_saddr);
		k->family = EADDR_AF_INET;
	}
}

/* GCRA on the bucket whose tat is *tatp: true when it has no budget now.
 * *until is when it may have some again: tat only grows, so every failure
 * before then is over budget. Two CPUs may race on one bucket; the loser
 * looks again once, then passes: the rate may be exceeded by an event, the
 * counts stay exact. */
static __always_inline bool over_budget(__u64 *tatp, __u64 now, __u64 interval, __u64 tolerance, __u64 *until)
{
	for (int i = 0; i < 2; i++) {
		__u64 tat = *(volatile __u64 *)tatp;
		__u64 t = tat > now ? tat : now;
		if (t - now > tolerance) {
			*until = t - tolerance;
			return true;
		}
		if (__sync_val_compare_and_swap(tatp, tat, t + interval) == tat) {
			*until = t + interval - tolerance;
			return false;
		}
	}
	*until = 0;
	return false;
}

/* Now on the limit's clock (limit_tick_ns): the buckets' tat and the CPUs'
 * until are on it, nothing else is. */
static __always_inline __u64 limit_now(void)
{
	__u64 tick = limit_tick_ns;
	if (tick)
		return bpf_jiffies64() * tick;
	return bpf_ktime_get_boot_ns();
}

/* Moves what this CPU held back for a cached key or cgroup bucket (*held)
 * into its count in counts (limit_counts, cgroup_counts). */
static __always_inline void flush_held(void *counts, const void *key, __u64 *held)
{
	if (!*held)
		return;
	__u64 *n = bpf_map_lookup_elem(counts, key);
	if (n)
		*n += *held; /* per-CPU value: no other writer */
	else
		bpf_map_update_elem(counts, key, held, BPF_NOEXIST);
	*held = 0;
}

static __always_inline bool same_key(const struct limit_key *a, const struct limit_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

/* The cgroup bucket of key k (struct cgroup_limit_key). */
static __always_inline bool same_group(const struct cgroup_limit_key *g, const struct limit_key *k)
{
	return g->cgroup_id == k->cgroup_id && g->err == k->err && g->syscall == k->syscall;
}

/* The cgroup's bucket, for a failure its key's bucket let pass (or that
 * would make its key): true when the cgroup is over budget, and the failure
 * is counted. A new bucket starts full, less this failure. */
static __always_inline bool group_limited(struct limit_cpu *c, const struct limit_key *k, __u64 now)
{
	if (!cg_interval_ns)
		return false;
	struct cgroup_limit_key g = {.cgroup_id = k->cgroup_id, .err = k->err, .syscall = k->syscall};
	__u64 *tat = bpf_map_lookup_elem(&cgroup_limits, &g);
	if (!tat) {
		__u64 fresh = now + cg_interval_ns;
		bpf_map_update_elem(&cgroup_limits, &g, &fresh, BPF_NOEXIST);
		return false; /* another CPU's made first: this one passes too, once */
	}
	__u64 until;
	if (!over_budget(tat, now, cg_interval_ns, cg_tolerance_ns, &until))
		return false;
	if (!same_group(&c->cg_key, k)) {
		flush_held(&cgroup_counts, &c->cg_key, &c->cg_held);
		__builtin_memcpy(&c->cg_key, &g, sizeof(g));
	}
	c->cg_until = until;
	c->cg_held++;
	c->cg_suppressed++;
	return true;
}

/* The CPU's cached cgroup bucket, still over budget, holds k's failure back. */
static __always_inline bool group_cached(struct limit_cpu *c, const struct limit_key *k, __u64 now)
{
	if (!cg_interval_ns || now >= c->cg_until || !same_group(&c->cg_key, k))
		return false;
	c->cg_held++;
	c->cg_suppressed++;
	return true;
}

/* The rate limit: true when the failure was counted and must go no further;
 * otherwise *id is its key's (0 if the key could not be kept). A storm of
 * one key on a CPU takes the fast path: the CPU's cached key, still over
 * budget, counted in the CPU's own slot: no hash lookup, no shared write;
 * a flood of many keys from one cgroup over its budget takes the next:
 * the CPU's cached cgroup bucket. The key's bucket decides before the
 * cgroup's, so that a storm its key holds back spends none of its
 * cgroup's budget, which stays for the cgroup's other failures. */
static __always_inline bool limited(struct limit_key *k, __u64 *id)
{
	__u32 zero = 0;
	struct limit_cpu *c = bpf_map_lookup_elem(&limit_cpus, &zero);
	if (!c)
		return false;
	__u64 now = limit_now();
	bool cached = c->id && same_key(&c->key, k);
	if (cached && now < c->until) {
		c->held++;
		c->suppressed++;
		return true;
	}
	if (group_cached(c, k, now))
		return true;
	struct limit_state *s = bpf_map_lookup_elem(&limits, k);
	if (!s) {
		if (group_limited(c, k, now))
			return true; /* no key made for it */
		c->keys++; /* ids start at 1: 0 is "none" */
		struct limit_state fresh = {
			.id = (c->keys << 16) | (bpf_get_smp_processor_id() & 0xffff),
			.tat = now + limit_interval_ns,
		};
		bpf_map_update_elem(&limits, k, &fresh, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&limits, k); /* another CPU's, if it won the race */
		*id = s ? s->id : 0;
		return false;
	}
	__u64 until;
	bool over = over_budget(&s->tat, now, limit_interval_ns, limit_tolerance_ns, &until);
	if (!cached || c->id != s->id) {
		flush_held(&limit_counts, &c->id, &c->held);
		__builtin_memcpy(&c->key, k, sizeof(*k));
		c->id = s->id;
	}
	c->until = until;
	if (over) {
		c->held++;
		c->suppressed++;
		return true;
	}
	if (group_limited(c, k, now))
		return true; /* the key's budget is spent all the same */
	*id = s->id;
	return false;
}

/* Who failed: the task's identity and namespaces, and its program's. */
static __always_inline void fill_task(struct event *e, struct task_struct *task, struct net *task_net, __u64 pid_tgid,
				      bool remember)
{
	/* The process's start, not the thread's: /proc/PID/stat shows the
	 * group leader's, and a process is what PID names. */
	e->start_boottime = task->group_leader->start_boottime; /* BTF pointers: plain loads */
	e->exec_id = task->self_exec_id;
	e->tgid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->ppid = task->real_parent->tgid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->netns = task_net->ns.inum;
	e->netns_cookie = net_cookie(task_net);
	e->mntns = task->nsproxy->mnt_ns->ns.inum;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	proc_facts(e, task, remember);
}

/* The call: fd, the sockaddr as passed, and the socket behind fd. */
static __always_inline void fill_call(struct event *e, struct task_struct *task, struct pt_regs *regs,
				      const void *uaddr, int addrlen)
{
	e->sock_family = 0;
	e->sock_type = 0;
	e->sock_protocol = 0;
	e->local_port = 0;
	e->sock_cookie = 0;
	__builtin_memset(e->local_addr, 0, sizeof(e->local_addr));
	int fd = (int)PT_REGS_PARM1_CORE_SYSCALL(regs);
	e->fd = fd;
	e->addrlen = addrlen < 0 ? 0 : (addrlen > 0xffff ? 0xffff : addrlen);

	__u32 n = e->addrlen;
	if (n > sizeof(e->addr))
		n = sizeof(e->addr);
	if (uaddr && n > 0 && bpf_probe_read_user(e->addr, n, uaddr) == 0)
		e->flags |= EADDR_F_ADDR;
	e->addr_copied = (e->flags & EADDR_F_ADDR) ? n : 0;

	/* EBADF and ENOTSOCK mean there is no socket behind fd to look at. */
	if (e->err != EADDR_EBADF && e->err != EADDR_ENOTSOCK)
		read_socket(e, task, fd);
}

/* Wake the reader when this record takes the backlog past a multiple of
 * wakeup_bytes: once per wakeup_bytes, not for every event past the
 * threshold while the reader gets going (each wakeup costs microseconds). A
 * wakeup missed in a race between CPUs is made up by the next multiple or
 * the reader's timer. 0: the kernel's default (when the reader has caught up). */
static __always_inline __u64 wakeup_flags(void)
{
	if (!wakeup_bytes)
		return 0;
	__u64 rec = sizeof(struct event) + 8; /* 8: the record header */
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 before = avail > rec ? avail - rec : 0;
	return avail / wakeup_bytes != before / wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* The current task, unless --pid or --netns leave it out (NULL). */
static __always_inline struct task_struct *kept_task(struct net **task_net)
{
	if (filter_tgid && (bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	*task_net = task->nsproxy->net_ns;
	if (filter_netns && (*task_net)->ns.inum != filter_netns)
		return 0;
	return task;
}

static __always_inline int emit(struct syscall_exit_ctx *ctx, __u8 syscall, struct sock *nodeport)
{
	struct net *task_net;
	struct task_struct *task = kept_task(&task_net);
	if (!task)
		return 0;

	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	const void *uaddr = (const void *)PT_REGS_PARM2_SYSCALL(regs);
	int addrlen = (int)PT_REGS_PARM3_SYSCALL(regs);
	__u64 cgroup_id = task_cgroup_id(task);
	__s32 err = nodeport ? 0 : (__s32)-ctx->ret;

	__u64 limit_id = 0;
	if (limit_interval_ns) {
		struct limit_key k = {.cgroup_id = cgroup_id, .netns = (__u64)task_net, .err = (__u16)err, .syscall = syscall};
		if (nodeport)
			key_local(&k, nodeport);
		else
			key_addr(&k, uaddr, addrlen);
		if (limited(&k, &limit_id))
			return 0;
	}

	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = cgroup_id;
	record_cgroup(task, cgroup_id);
	e->err = err;
	e->syscall = syscall;
	e->flags = (nodeport ? EADDR_F_NODEPORT : 0) | (limit_id ? EADDR_F_LIMITED : 0);
	e->limit_id = limit_id;
	e->async_ns = 0;
	fill_task(e, task, task_net, bpf_get_current_pid_tgid(), true); /* not before: a suppressed failure needs no ids */
	fill_call(e, task, regs, uaddr, addrlen);
	bpf_ringbuf_submit(e, wakeup_flags());
	return 0;
}

/* The limit key's address from a sockaddr already copied (pending events). */
static __always_inline void key_copied_addr(struct limit_key *k, const struct event *p)
{
	__u16 family = *(const __u16 *)p->addr;
	if (!(p->flags & EADDR_F_ADDR))
		return;
	if (family == EADDR_AF_INET && p->addr_copied >= 8) {
		k->family = EADDR_AF_INET;
		__builtin_memcpy(k->addr, p->addr + 4, 4);
	} else if (family == EADDR_AF_INET6 && p->addr_copied >= 24) {
		k->family = EADDR_AF_INET6;
		__builtin_memcpy(k->addr, p->addr + 8, 16);
	}
}

/* A TCP socket whose connect never had an answer (SYN-ACK): rcv_nxt is
 * still the 0 that tcp_connect_init set (the peer's first sequence number
 * + 1 is 0 once in 2^32). */
static __always_inline bool never_answered(const struct sock *sk)
{
	return BPF_CORE_READ((const struct tcp_sock *)sk, rcv_nxt) == 0;
}

/* A pending connect's source port, read at connect(), is released when it
 * fails unless bind() chose it (tcp_set_state, TCP_CLOSE). Refused within
 * connect() (loopback), it was gone already: then conn_ends has it. */
static __always_inline void released(struct event *e, struct sock *sk)
{
	if (!e->local_port) {
		if (ended_on)
			fill_ended(e);
		return;
	}
	if (!(BPF_CORE_READ_BITFIELD_PROBED(sk, sk_userlocks) & EADDR_SOCK_BINDPORT_LOCK))
		e->flags |= EADDR_F_RELEASED;
}

/* Reports the pending connect of sk if the socket has an error. Whoever
 * deletes the entry reports it (the error handlers and the connect's exit
 * can race): the event is copied out first, as a deleted entry's memory
 * may be reused at once. */
static __always_inline void async_report(struct sock *sk, int err, __u64 cookie)
{
	__u64 key = (__u64)sk;
	struct pending_conn *pc = bpf_map_lookup_elem(&pending, &key);
	if (!pc || err <= 0)
		return;
	struct event *p = &pc->ev;
	/* Connected, and its change to ESTABLISHED not seen (the kernel skipped
	 * that run of async_state): this error is a later one, not the
	 * connect's. */
	if (!never_answered(sk)) {
		bpf_map_delete_elem(&pending, &key);
		return;
	}
	if (!wanted(-err) || udp_only(err)) { /* pending sockets are TCP */
		bpf_map_delete_elem(&pending, &key);
		return;
	}
	struct limit_key k = {.cgroup_id = p->cgroup_id, .netns = (__u64)BPF_CORE_READ(sk, __sk_common.skc_net.net),
			      .err = (__u16)err, .syscall = EADDR_SYS_CONNECT};
	key_copied_addr(&k, p);
	__u64 limit_id = 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		/* Claimed here, it is held back or lost: counted either way. */
		if (bpf_map_delete_elem(&pending, &key) == 0 && !(limit_interval_ns && limited(&k, &limit_id)))
			count_lost();
		return;
	}
	/* Straight-line, so that every kernel's verifier sees the reservation
	 * released on each path. Another CPU that deleted the entry first
	 * reports it. */
	if (bpf_probe_read_kernel(e, sizeof(*e), p) || bpf_map_delete_elem(&pending, &key) ||
	    (limit_interval_ns && limited(&k, &limit_id))) {
		bpf_ringbuf_discard(e, 0);
		return;
	}
	__u64 now = bpf_ktime_get_boot_ns();
	e->async_ns = now - e->boot_ns;
	e->boot_ns = now;
	e->err = err;
	e->flags |= ((e->flags & EADDR_F_INTERRUPTED) ? 0 : EADDR_F_ASYNC) | (limit_id ? EADDR_F_LIMITED : 0);
	e->limit_id = limit_id;
	if (cookie)
		e->sock_cookie = cookie;
	released(e, sk);
	bpf_ringbuf_submit(e, wakeup_flags());
	bpf_map_update_elem(&async_done, &key, &err, BPF_ANY);
}

/* A connect() that fails with the error its socket already reported
 * asynchronously (the program asks again, as hiredis and Ruby do): the
 * same failure, not a second one. */
static __always_inline bool reported_async(long ret)
{
	if (!async_on)
		return false;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 key = (__u64)fd_sock(task, (int)PT_REGS_PARM1_CORE_SYSCALL(regs));
	__s32 *err = key ? bpf_map_lookup_elem(&async_done, &key) : 0;
	if (!err || *err != (__s32)-ret)
		return false;
	bpf_map_delete_elem(&async_done, &key);
	return true;
}

/* A TCP connect() that returned EINPROGRESS, or that a signal interrupted
 * (intr): kept as its event, by socket, until the socket fails or connects. */
static __always_inline int track_pending(bool intr)
{
	struct net *task_net;
	struct task_struct *task = kept_task(&task_net);
	if (!task)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct sock *sk = fd_sock(task, (int)PT_REGS_PARM1_CORE_SYSCALL(regs));
	if (!sk || BPF_CORE_READ(sk, sk_protocol) != EADDR_IPPROTO_TCP)
		return 0;
	__u32 zero = 0;
	struct pending_conn *pc = bpf_map_lookup_elem(&pending_scratch, &zero);
	if (!pc)
		return 0;
	pc->taken = 0;
	pc->end = PENDING_OPEN;
	struct event *e = &pc->ev;
	__u64 cgroup_id = task_cgroup_id(task);
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = cgroup_id;
	record_cgroup(task, cgroup_id);
	e->err = 0;
	e->syscall = EADDR_SYS_CONNECT;
	e->flags = intr ? EADDR_F_INTERRUPTED : 0;
	e->limit_id = 0;
	e->async_ns = 0;
	/* Not recorded in procs: most of these connects succeed, and the
	 * facts must be in the event that is read first. */
	fill_task(e, task, task_net, bpf_get_current_pid_tgid(), false);
	fill_call(e, task, regs, (const void *)PT_REGS_PARM2_SYSCALL(regs), (int)PT_REGS_PARM3_SYSCALL(regs));
	__u64 key = (__u64)sk;
	bpf_map_update_elem(&pending, &key, pc, BPF_ANY);
	/* Over loopback the outcome can come within connect() itself, before
	 * the entry was there: a refusal is reported now, a connection made
	 * leaves no entry behind (a stale one would be taken, once the memory
	 * is reused, for another socket's). Read after the entry is stored, so
	 * a change after this is the tracepoints' to see. */
	if (BPF_CORE_READ(sk, __sk_common.skc_state) != EADDR_TCP_SYN_SENT) {
		async_report(sk, BPF_CORE_READ(sk, sk_err), e->sock_cookie);
		bpf_map_delete_elem(&pending, &key);
	}
	return 0;
}

/* A blocking connect() that a signal interrupted: its handshake goes on.
 * The kernel restarts the call (SA_RESTART: the restarted call's failure
 * is the one the socket reported, reported_async), or the program gets
 * EINTR and may wait on the socket and read its error (Python does, PEP
 * 475): either way its outcome is the socket's, followed as a pending
 * connect's. ERESTARTSYS: no timeout was set; EINTR: SO_SNDTIMEO was. */
static __always_inline bool interrupted(long ret)
{
	return ret == -EADDR_ERESTARTSYS || ret == -EADDR_EINTR;
}

SEC("tracepoint/syscalls/sys_exit_connect")
int exit_connect(struct syscall_exit_ctx *ctx)
{
	long ret = ctx->ret;
	if (async_on && (ret == -EADDR_EINPROGRESS || interrupted(ret)))
		track_pending(ret != -EADDR_EINPROGRESS);
	if (nodeport_on && (ret == 0 || ret == -EADDR_EINPROGRESS))
		return nodeport_check(ctx);
	if (!wanted(ret) || !proto_wanted(ret) || reported_async(ret))
		return 0;
	return emit(ctx, EADDR_SYS_CONNECT, 0);
}

/* A TCP connect that left SYN_SENT for CLOSE with an error: its source
 * address and port (struct conn_end). inet_put_port has zeroed skc_num;
 * inet_sport is still the port. skc_num still set means bind() chose the
 * port and the socket keeps it: the exit reads it from the socket. */
static __always_inline void record_end(const struct sock *sk)
{
	int err = sk->sk_err;
	if (err <= 0 || sk->sk_protocol != EADDR_IPPROTO_TCP || sk->__sk_common.skc_num)
		return;
	/* --netns: others' entries would only crowd the LRU. (--pid cannot be
	 * applied: a timeout ends in a timer, in whichever task it interrupts.) */
	if (filter_netns && BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum) != filter_netns)
		return;
	struct conn_end c = {.err = err, .family = sk->__sk_common.skc_family};
	c.local_port = __builtin_bswap16(BPF_CORE_READ((struct inet_sock *)sk, inet_sport));
	if (!c.local_port)
		return;
	if (c.family == EADDR_AF_INET6)
		BPF_CORE_READ_INTO(&c.local_addr, sk, __sk_common.skc_v6_rcv_saddr);
	else
		BPF_CORE_READ_INTO((__u32 *)c.local_addr, sk, __sk_common.skc_rcv_saddr);
	/* A non-blocking connect's entry is needed only when it was refused
	 * within connect() (its event was read with no port); the others are
	 * left to the LRU. */
	__u64 key = bpf_get_socket_cookie((struct sock *)sk);
	bpf_map_update_elem(&conn_ends, &key, &c, BPF_ANY);
}

/* The kernel reported an error on a socket whose pending connect left
 * SYN_SENT for CLOSE with none on it (PENDING_QUIET). tcp_done_with_error
 * sets the error before that change: held now, it was set after it, by
 * tcp_disconnect (connect() with AF_UNSPEC, shutdown()), whose ECONNRESET is
 * the program's own doing, not a failure: forgotten. Not held, its program
 * took it in between: reported with what it took when exit_getsockopt has
 * seen that; else left to it, or to async_destroy, as the connect's failure
 * (PENDING_TAKEN). False when sk has no such connect. */
static __always_inline bool error_after_quiet(struct sock *sk, int err)
{
	__u64 key = (__u64)sk;
	struct pending_conn *p = bpf_map_lookup_elem(&pending, &key);
	if (!p || p->end != PENDING_QUIET)
		return false;
	if (err > 0)
		bpf_map_delete_elem(&pending, &key);
	else if (p->taken > 0)
		async_report(sk, p->taken, bpf_get_socket_cookie(sk));
	else
		p->end = PENDING_TAKEN;
	return true;
}

/* A socket's error: a pending connect refused, timed out, unreachable.
 * The kernel reports it after the change to CLOSE (tcp_done_with_error),
 * so the failing connect's source port is recorded here too: when the
 * kernel skipped that run of async_state (it was already running on the
 * CPU: runs_skipped), this one still records it; first, as async_report
 * reads it for a refusal within connect(). */
SEC("tp_btf/inet_sk_error_report")
int BPF_PROG(async_error, const struct sock *sk)
{
	if (ended_on && sk->__sk_common.skc_state == EADDR_TCP_CLOSE && sk->sk_protocol == EADDR_IPPROTO_TCP &&
	    never_answered(sk))
		record_end(sk);
	if (async_on && !error_after_quiet((struct sock *)sk, sk->sk_err))
		async_report((struct sock *)sk, sk->sk_err, bpf_get_socket_cookie((struct sock *)sk));
	return 0;
}

/* A pending connect left SYN_SENT for CLOSE. tcp_done_with_error sets the
 * error, then changes the state (here), then reports the error (async_error),
 * and its program may take the error with SO_ERROR at any point after the
 * first. With the error still on the socket, it is reported; else with the
 * one its program took, if exit_getsockopt has seen that; else it is kept
 * (PENDING_QUIET) for what follows (error_after_quiet): the report of an
 * error it took, or of a disconnect's, or none (its program's close():
 * async_destroy forgets it). */
static __always_inline void closed(struct sock *sk)
{
	__u64 key = (__u64)sk;
	struct pending_conn *p = bpf_map_lookup_elem(&pending, &key);
	if (!p)
		return;
	int taken = p->taken, err = sk->sk_err;
	if (err <= 0 && taken <= 0) {
		p->end = PENDING_QUIET;
		return;
	}
	async_report(sk, err > 0 ? err : taken, bpf_get_socket_cookie(sk));
	bpf_map_delete_elem(&pending, &key);
}

/* A pending connect that leaves SYN_SENT: connected (forgotten), or closed
 * (closed). A socket that enters SYN_SENT is a new connect: what was
 * reported for its memory before is another socket's. Attached also without
 * async_on (Options NodePort, ended_on): it makes each connecting socket's
 * cookie and records how failing connects ended. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(async_state, const struct sock *sk, int oldstate, int newstate)
{
	if (newstate == EADDR_TCP_SYN_SENT) {
		/* Made now, before connect() returns: its exit reads it. */
		bpf_get_socket_cookie((struct sock *)sk);
		if (!async_on)
			return 0;
		__u64 key = (__u64)sk;
		bpf_map_delete_elem(&async_done, &key);
		bpf_map_delete_elem(&pending, &key); /* another socket's, at this memory before */
		return 0;
	}
	if (oldstate != EADDR_TCP_SYN_SENT)
		return 0;
	/* Before async_report, which reads it for a refusal within connect(). */
	if (ended_on && newstate == EADDR_TCP_CLOSE)
		record_end(sk);
	if (!async_on)
		return 0;
	if (newstate == EADDR_TCP_CLOSE) {
		closed((struct sock *)sk);
		return 0;
	}
	__u64 key = (__u64)sk;
	bpf_map_delete_elem(&pending, &key);
	return 0;
}

#define EADDR_SOL_SOCKET 1
#define EADDR_SO_ERROR 4

/* A program reads its socket's error (getsockopt SOL_SOCKET SO_ERROR) while
 * the socket's pending connect is kept: what it took is kept with it
 * (closed, error_after_quiet and async_destroy report it when the socket
 * no longer holds the error). When the connect has ended (CLOSE) and
 * neither async program saw that (PENDING_OPEN: the kernel did not run
 * them), or they saw its error taken (PENDING_TAKEN), it is reported now,
 * with that error. A
 * connect still going is not ended here: optval is read from the program's
 * memory, where another of its threads could write. Everything else costs a
 * compare (ret) or two (level, optname). */
SEC("tracepoint/syscalls/sys_exit_getsockopt")
int exit_getsockopt(struct syscall_exit_ctx *ctx)
{
	if (!async_on || ctx->ret != 0)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if ((int)PT_REGS_PARM2_CORE_SYSCALL(regs) != EADDR_SOL_SOCKET ||
	    (int)PT_REGS_PARM3_CORE_SYSCALL(regs) != EADDR_SO_ERROR)
		return 0;
	struct sock *sk = fd_sock(task, (int)PT_REGS_PARM1_CORE_SYSCALL(regs));
	__u64 key = (__u64)sk;
	struct pending_conn *p = sk ? bpf_map_lookup_elem(&pending, &key) : 0;
	if (!p)
		return 0;
	int err = 0;
	if (bpf_probe_read_user(&err, sizeof(err), (const void *)PT_REGS_PARM4_CORE_SYSCALL(regs)) || err <= 0)
		return 0; /* 0: connected, or still connecting: the state's change tells */
	p->taken = err;
	if (BPF_CORE_READ(sk, __sk_common.skc_state) == EADDR_TCP_CLOSE && p->end != PENDING_QUIET)
		async_report(sk, err, 0); /* the cookie: the event's, read at connect() */
	return 0;
}

/* A TCP socket destroyed while its pending connect is still kept: its end
 * was not seen whole. Not a skipped run (the kernel counts those, and what
 * one skips the other records): neither async program was run at all, which
 * happens where the kernel does not run BPF programs in a softirq (a timer's
 * timeout, a reset's or an ICMP error's end of the handshake) over some
 * tasks (docs/testing.md, "the seventh round"); or its program took the
 * error after async_error had looked (PENDING_TAKEN). Runs in the context of
 * whoever destroys the socket, mostly its program's close(). The error is
 * reported when the socket still holds it, else the one its program took
 * with SO_ERROR; taken otherwise (recv, send), it is gone, and the failure is
 * counted (EADDR_LOST_UNSEEN) instead of guessed. A connect that succeeded
 * unseen, or that its program closed while it went on (PENDING_QUIET), is
 * only forgotten. */
SEC("tp_btf/tcp_destroy_sock")
int BPF_PROG(async_destroy, struct sock *sk)
{
	__u64 key = (__u64)sk;
	struct pending_conn *p = bpf_map_lookup_elem(&pending, &key);
	if (!p)
		return 0;
	bool failed = p->end != PENDING_QUIET && never_answered(sk);
	int taken = p->taken, err = sk->sk_err;
	if (failed)
		async_report(sk, err > 0 ? err : taken, bpf_get_socket_cookie(sk));
	/* 0 only when async_report did not claim it: nobody reported it. */
	if (bpf_map_delete_elem(&pending, &key) == 0 && failed)
		count_in(EADDR_LOST_UNSEEN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_bind")
int exit_bind(struct syscall_exit_ctx *ctx)
{
	return report(ctx, EADDR_SYS_BIND);
}
