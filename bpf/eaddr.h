/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The event eaddr sends from the kernel. Defined once, here; Go uses the type
 * that bpf2go generates from it (tracer.eaddrEvent), never a copy.
 */
#ifndef EADDR_H
#define EADDR_H

/* Constants Go needs are enums, so that bpf2go -type exports them (Go never
 * retypes them); the rest are #defines. */

/* event.syscall */
enum syscall_id {
	EADDR_SYS_CONNECT = 1,
	EADDR_SYS_BIND = 2,
};

/* event.flags */
enum event_flag {
	EADDR_F_ADDR = 1,     /* addr holds addr_copied bytes copied from user memory */
	EADDR_F_SOCKET = 2,   /* sock_* and local_* were read from the fd's socket */
	EADDR_F_NODEPORT = 4, /* not a failure: connect() got a source port in the NodePort range */
	EADDR_F_LIMITED = 8,  /* limit_id is valid: the rate limit is on */
	/* exe_* and args are empty: an earlier event of the same process
	 * (tgid, start_boottime, exec_id) carried them; see struct proc_key. */
	EADDR_F_PROC_SENT = 16,
	/* A non-blocking connect() (EINPROGRESS) that failed later: err is the
	 * socket's error, the rest is as at connect(), async_ns how long after. */
	EADDR_F_ASYNC = 32,
	/* local_* are the source address and port the connect had, which the
	 * kernel released when it failed: no socket holds them any more. A
	 * blocking connect's were recorded at its SYN_SENT -> CLOSE (struct
	 * conn_end), a non-blocking one's at connect(). */
	EADDR_F_RELEASED = 64,
	/* A blocking connect() that a signal interrupted (ERESTARTSYS, EINTR)
	 * and whose socket failed later: err is the socket's error, async_ns
	 * how long after the call, the rest as at the call. Kept as a pending
	 * connect is (EADDR_F_ASYNC), but not flagged async: the program got
	 * the error from a connect() the kernel restarted, or by waiting on
	 * the socket after EINTR (Python does), not from a non-blocking one. */
	EADDR_F_INTERRUPTED = 128,
};

/* Errnos the programs test (Linux's values). */
enum errno_id {
	EADDR_EINTR = 4,
	EADDR_EBADF = 9,
	EADDR_ENOTSOCK = 88,
	EADDR_EADDRINUSE = 98,
	EADDR_EADDRNOTAVAIL = 99,
	EADDR_EINPROGRESS = 115, /* never reported: a non-blocking connect() in progress */
	/* What a TCP handshake fails with (the socket's error): only these
	 * look for a released source port (struct conn_end). */
	EADDR_ENETUNREACH = 101,
	EADDR_ETIMEDOUT = 110,
	EADDR_ECONNREFUSED = 111,
	EADDR_EHOSTUNREACH = 113,
	/* Never reported either: the kernel's restart codes (include/linux/errno.h),
	 * which the exit tracepoint sees when a signal interrupts a call (a blocking
	 * connect() waiting for its handshake). No program sees them: the call is
	 * restarted or returns EINTR, with which a connect() goes on in the
	 * background, as with EINPROGRESS; either way, with async_on, the socket
	 * is followed to its outcome (EADDR_F_INTERRUPTED). */
	EADDR_ERESTARTSYS = 512,
	EADDR_ERESTART_RESTARTBLOCK = 516,
};

/* TCP states (include/net/tcp_states.h) and IPPROTO_TCP. */
#define EADDR_TCP_SYN_SENT 2
#define EADDR_TCP_CLOSE 7
#define EADDR_IPPROTO_TCP 6
#define EADDR_SOCK_BINDPORT_LOCK 4 /* sk_userlocks: bind() chose the port (include/net/sock.h) */

/* The slots of the per-CPU counter map lost. */
enum lost_slot {
	EADDR_LOST_RING = 0,   /* events dropped: the ring buffer was full */
	EADDR_LOST_UNSEEN = 1, /* pending connects whose end nothing of eaddr's saw (errno unknown) */
	EADDR_LOST_SLOTS = 2,
};

/* Non-blocking connects waiting for their outcome (LRU, by socket). */
#define EADDR_PENDING 8192

#define EADDR_AF_INET 2
#define EADDR_AF_INET6 10

#define EADDR_ADDR_MAX 128 /* holds sockaddr_un (110) and sockaddr_in6 (28) */
#define EADDR_EXE_NAME_MAX 32
#define EADDR_ARGS_MAX 64

struct event {
	__u64 boot_ns;     /* bpf_ktime_get_boot_ns() at syscall exit */
	__u64 cgroup_id;   /* cgroup v2 id of the task */
	__u64 exe_ino;     /* inode of the task's executable (mm->exe_file), 0 if none */
	__u32 exe_dev;     /* its superblock's kernel dev_t (MAJOR << 20 | MINOR) */
	__u16 args_len;    /* bytes of args that are valid */
	__u16 pad0;
	__u32 tgid;
	__u32 tid;
	__u32 ppid;
	__u32 uid;
	__u32 netns;       /* inode: of the socket's netns when known, else the task's */
	__u32 mntns;       /* inode of the task's mount namespace */
	__s32 fd;
	__s32 err;         /* positive errno */
	__u16 addrlen;     /* addrlen argument as passed, clamped to 65535 */
	__u16 addr_copied; /* bytes of addr that are valid */
	__u16 sock_family;
	__u16 sock_type;
	__u16 sock_protocol;
	__u16 local_port;  /* host byte order; 0 when not bound */
	__u8 syscall;      /* enum syscall_id */
	__u8 flags;        /* enum event_flag, or-ed */
	__u8 pad[2];
	__u8 local_addr[16]; /* bound address: 4 bytes for AF_INET, 16 for AF_INET6 */
	char comm[16];
	__u8 addr[EADDR_ADDR_MAX]; /* sockaddr as passed to the syscall */
	/* What identifies the binary after the process has exited: the file name
	 * of the executable, and the start of argv (NUL-separated; a busybox applet
	 * or an interpreter's script is there). */
	char exe_name[EADDR_EXE_NAME_MAX];
	char args[EADDR_ARGS_MAX];
	/* Which network namespace, for certain: inodes are reused as soon as a
	 * netns is freed, cookies never are. 0 where the kernel has none (<5.12). */
	__u64 netns_cookie;
	/* The process's start (its group leader's, ns since boot): with tgid,
	 * which process for certain, as /proc/PID/stat's starttime says it in
	 * clock ticks. */
	__u64 start_boottime;
	/* With the rate limit on (EADDR_F_LIMITED): the key this event passed
	 * for, an id never reused (struct limit_state). */
	__u64 limit_id;
	/* The task's self_exec_id: which program the process runs, as execve()
	 * changes it (pid and start time stay). */
	__u64 exec_id;
	/* EADDR_F_ASYNC: ns from the connect() that returned EINPROGRESS to
	 * the socket's error; 0 otherwise. */
	__u64 async_ns;
	/* The socket's cookie (SO_COOKIE; `ss -e` shows it as sk:HEX): links
	 * the events of one socket, such as a nodeport_collision and its
	 * connect's later failure. 0 when the socket had none yet. */
	__u64 sock_cookie;
};

_Static_assert(sizeof(struct event) == 384, "event layout changed: update decode tests");

/*
 * How a TCP connect ended, recorded at its SYN_SENT -> CLOSE with an error
 * (tracepoint sock:inet_sock_set_state), and again at the error's report
 * that follows (sock:inet_sk_error_report, for a socket that never had a
 * SYN-ACK), by socket cookie, in the LRU hash `conn_ends`: the kernel has
 * released the source port and, by the time a blocking connect() returns,
 * reset the source address, so its exit reads them here (and deletes the
 * entry). Twice, because the kernel skips a program's run on a CPU where
 * it is already running (runs_skipped): a timer's state change that comes
 * over async_state in process context is lost, the report usually not.
 * Only failing connects write it. An entry missed by both, or evicted
 * before it is read, leaves the event as before: local 0.0.0.0:0, without
 * EADDR_F_RELEASED.
 */
#define EADDR_CONN_ENDS 4096

struct conn_end {
	__u8 local_addr[16]; /* as event.local_addr */
	__u16 local_port;    /* host byte order */
	__u16 family;
	__s32 err;           /* the socket's error: the entry is only for a connect() failing with it */
};

/*
 * What identifies a process's program (exe_* and args of struct event) is
 * read and sent once per process and program: the first event of a
 * proc_key fills them and records them in the LRU map `procs`; later events
 * of that key have EADDR_F_PROC_SENT and leave them empty, and user space
 * fills them from what it kept (or from `procs`).
 */
#define EADDR_PROCS 8192 /* processes remembered (LRU) */

struct proc_key {
	__u32 tgid;
	__u32 pad;
	__u64 start_boottime;
	__u64 exec_id;
};

struct proc_facts {
	__u64 exe_ino;
	__u32 exe_dev;
	__u16 args_len;
	__u16 pad;
	char exe_name[EADDR_EXE_NAME_MAX];
	char args[EADDR_ARGS_MAX];
};

/*
 * The rate limit (--rate-limit), applied before the rest of the event is
 * read: a token bucket (GCRA) per limit_key in the LRU hash `limits`, whose
 * state is written only when a failure passes. Each CPU keeps the last key
 * it looked up and until when that key is over budget (struct limit_cpu):
 * a storm's failures are counted there, in memory of that CPU only. When
 * the CPU moves to another key, the count goes to `limit_counts` (key id ->
 * count, per CPU). User space reads both each tick; a key's count is the
 * sum of its limit_counts and of the CPUs' slots that hold it.
 */
#define EADDR_LIMIT_KEYS 16384 /* keys remembered (LRU) */

struct limit_key {
	__u64 cgroup_id;
	__u64 netns;   /* the task's struct net: with the cgroup id, which netns for certain */
	__u16 err;
	__u8 syscall;  /* enum syscall_id */
	__u8 family;   /* AF_INET or AF_INET6 when addr is set, else 0 */
	__u32 pad;
	__u8 addr[16]; /* connect: the destination; bind and NodePort: the local address */
};

struct limit_state {
	__u64 id;  /* (keys created on that CPU) << 16 | CPU, from 1 << 16: unique while eaddr runs */
	__u64 tat; /* GCRA's theoretical arrival time, ns on the limit's clock (jiffies x limit_tick_ns, or since boot) */
};

/*
 * The cgroup's bucket (--rate-limit-cgroup), a second GCRA bucket per
 * cgroup, syscall and errno, in the LRU hash `cgroup_limits` (key -> tat):
 * a failure that its key's bucket lets pass must pass its cgroup's too, so
 * that a workload failing toward thousands of addresses, each a fresh key
 * with a full bucket, sends no more than this rate into the ring. A key
 * that does not exist yet is made only once its cgroup's bucket let the
 * failure pass (a flood beyond the rate makes no keys); one that exists
 * has spent its budget on the failure all the same. While a CPU's last
 * cgroup is over budget (struct limit_cpu, cg_*), that cgroup's failures
 * are held back there before any key is looked up. Held back failures are
 * counted per CPU (limit_cpu.cg_suppressed, not in suppressed) and per
 * bucket in `cgroup_counts` (key -> count, per CPU), as the keys' are. No
 * netns in the key: user space gives a bucket's counts to the pod series
 * of its cgroup's events, which carry the cgroup id, syscall and errno.
 */
#define EADDR_CGROUP_LIMITS 4096 /* buckets remembered (LRU) */

struct cgroup_limit_key {
	__u64 cgroup_id;
	__u16 err;
	__u8 syscall; /* enum syscall_id */
	__u8 pad[5];
};

/* Per CPU, in the one-entry per-CPU array `limit_cpus`. */
struct limit_cpu {
	__u64 suppressed;      /* every failure a key's bucket held back on this CPU, whatever became of its key */
	__u64 keys;            /* keys this CPU created: more than the map holds means some were evicted */
	struct limit_key key;  /* the last key looked up ... */
	__u64 id;              /* ... its id (0: none yet) */
	__u64 until;           /* ... over budget until then (ns on the limit's clock, as tat) */
	__u64 held;            /* ... failures held back here and not yet in limit_counts */
	__u64 cg_suppressed;   /* every failure a cgroup's bucket held back on this CPU */
	struct cgroup_limit_key cg_key; /* the last cgroup bucket found over budget here ... */
	__u64 cg_until;        /* ... until then (0: none) */
	__u64 cg_held;         /* ... failures held back here and not yet in cgroup_counts */
};

_Static_assert(sizeof(struct limit_key) == 40, "limit_key layout changed");
_Static_assert(sizeof(struct cgroup_limit_key) == 16, "cgroup_limit_key layout changed");
_Static_assert(sizeof(struct conn_end) == 24, "conn_end layout changed");

/*
 * The cgroup v2 path of a failing task, recorded in the cgroup_paths map (keyed
 * by cgroup id) the first time a cgroup fails, so user space can name the
 * cgroup even after it was removed. Names go leaf first; the root is not named.
 */
#define EADDR_CGROUP_DEPTH 10
#define EADDR_CGROUP_NAME_MAX 96 /* cri-containerd-<64 hex>.scope is 85 */
#define EADDR_CGROUP_PATHS 4096  /* cgroups remembered (LRU) */

/* cgroup_path.flags; an enum so that Go gets them through bpf2go -type. */
enum cgroup_flag {
	EADDR_CG_DEEP = 1, /* deeper than EADDR_CGROUP_DEPTH: the names nearest the root are missing */
	EADDR_CG_LONG = 2, /* a name did not fit in EADDR_CGROUP_NAME_MAX */
};

struct cgroup_path {
	__u32 depth; /* names[0..depth) are valid */
	enum cgroup_flag flags; /* EADDR_CG_*, or-ed */
	char names[EADDR_CGROUP_DEPTH][EADDR_CGROUP_NAME_MAX];
};

_Static_assert(sizeof(struct cgroup_path) == 968, "cgroup_path layout changed");
_Static_assert(__builtin_offsetof(struct event, addr) % 8 == 0, "addr must be 8-byte aligned");

/* Never instantiated: makes the enums above part of the object's BTF. */
struct eaddr_enums {
	enum syscall_id syscall;
	enum event_flag flag;
	enum errno_id err;
	enum lost_slot lost;
};

#endif /* EADDR_H */
