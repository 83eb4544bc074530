#!/bin/busybox sh
# PID 1 inside the qemu guest of testdata/kernels/run.sh (the host root over 9p, read-only;
# no network device). Runs eaddr against two bind() failures from kubepods-style cgroups that
# are removed right after their process exits (the second one in its own netns), then against
# a loopback connect with --nodeport-collisions; prints the events and facts between ====
# markers on the console for the host to check, and powers off. Parameters come from the kernel
# command line: kdir= (binaries), cgbase=, pod1=, cid1=, pod2=, cid2=. Every wait has a deadline.
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs dev /dev
# scratch space on /run, not /tmp: the host's work directory (kdir) is under /tmp
$B mount -t tmpfs run /run
$B mkdir -p /run/bb /run/home /run/tmp && $B --install -s /run/bb
export PATH=/run/bb:/usr/sbin:/usr/bin:/sbin:/bin HOME=/run/home TMPDIR=/run/tmp

off() { sync; echo o > /proc/sysrq-trigger; sleep 30; }
kv() { echo "==== kv $1=$2"; }

mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
ip link set lo up
hostname eaddr-kernels

for a in $(cat /proc/cmdline); do
	case $a in
	kdir=*) K=${a#kdir=} ;; cgbase=*) CGB=${a#cgbase=} ;;
	pod1=*) POD1=${a#pod1=} ;; cid1=*) CID1=${a#cid1=} ;;
	pod2=*) POD2=${a#pod2=} ;; cid2=*) CID2=${a#cid2=} ;;
	esac
done
if [ -z "$K" ] || [ -z "$CGB" ] || [ -z "$POD1" ] || [ -z "$CID1" ] || [ -z "$POD2" ] || [ -z "$CID2" ]; then
	echo "==== guest: missing parameters on the kernel command line: $(cat /proc/cmdline)"
	off
fi
echo
kv uname "$(uname -r)"
kv netns_init "$(readlink /proc/self/ns/net)"
up() { cut -d' ' -f1 /proc/uptime; }

wait_attached() { # log, seconds, pid
	i=0
	while ! grep -q 'msg=attached' "$1" 2>/dev/null; do
		i=$((i+1))
		[ $i -gt $(($2*10)) ] && { echo "==== eaddr not attached after $2 s"; return 1; }
		kill -0 "$3" 2>/dev/null || { echo "==== eaddr exited before attaching"; return 1; }
		sleep 0.1
	done
}

wait_lines() { # file, lines, seconds
	i=0
	while [ "$(wc -l < "$1")" -lt "$2" ]; do
		i=$((i+1))
		[ $i -gt $(($3*10)) ] && { echo "==== fewer than $2 lines in $1 after $3 s"; return 1; }
		sleep 0.1
	done
}

stop_eaddr() { # pid, run
	kill -INT "$1"
	i=0
	while kill -0 "$1" 2>/dev/null; do
		i=$((i+1))
		[ $i -gt 300 ] && { echo "==== eaddr did not stop in 30 s: SIGKILL"; kill -KILL "$1"; break; }
		sleep 0.1
	done
	wait "$1"
	kv "eaddr_exit_$2" $?
}

dump() { # run, stderr file, events file
	echo "==== BEGIN stderr $1"; cat "$2"; echo "==== END stderr $1"
	echo "==== BEGIN events $1"; cat "$3"; echo "==== END events $1"
}

# ---- run 1: bind() failures from pod-like cgroups removed right after their process exits.
# --flush-interval 3s: eaddr reads the ring at most every 3 s, so it usually reads the events
# after the cgroups are gone and their paths can come only from the BPF map cgroup_paths.
t0=$(up)
$K/eaddr trace --errno all --diagnose=false --explain off --summary-interval 0 --flush-interval 3s \
	>/run/ev1.json 2>/run/err1.log &
E=$!
if wait_attached /run/err1.log 120 $E; then
	echo "==== run 1 attached ($t0 -> $(up) s uptime)"
	CG1=/sys/fs/cgroup/$CGB/kubepods/besteffort/pod$POD1/$CID1
	mkdir -p "$CG1"
	sh -c "echo \$\$ > $CG1/cgroup.procs && exec $K/bindfail"
	kv bindfail_1 $?
	rmdir "$CG1" && kv removed_1 "${CG1#/sys/fs/cgroup}"
	CG2=/sys/fs/cgroup/$CGB/kubepods/burstable/pod$POD2/$CID2
	mkdir -p "$CG2"
	sh -c "echo \$\$ > $CG2/cgroup.procs && exec unshare -n sh -c 'ip link set lo up && echo \"==== kv netns_2=\$(readlink /proc/self/ns/net)\" && exec $K/bindfail'"
	kv bindfail_2 $?
	rmdir "$CG2" && kv removed_2 "${CG2#/sys/fs/cgroup}"
	kv cgroups_left "$(find /sys/fs/cgroup/$CGB -mindepth 4 -type d | wc -l)"
	wait_lines /run/ev1.json 2 30
fi
stop_eaddr $E 1
dump 1 /run/err1.log /run/ev1.json

# ---- run 2: --nodeport-collisions loads; a loopback connect from a port in 30000-30011
t0=$(up)
$K/eaddr trace --nodeport-collisions --diagnose=false --explain off --summary-interval 0 \
	>/run/ev2.json 2>/run/err2.log &
E=$!
if wait_attached /run/err2.log 120 $E; then
	echo "==== run 2 attached ($t0 -> $(up) s uptime)"
	echo "30000 30011" > /proc/sys/net/ipv4/ip_local_port_range
	nc -l -p 8080 >/dev/null &
	L=$!
	sleep 0.5
	echo hi | timeout 5 nc 127.0.0.1 8080
	kill $L 2>/dev/null
	echo "32768 60999" > /proc/sys/net/ipv4/ip_local_port_range
	wait_lines /run/ev2.json 1 30
fi
stop_eaddr $E 2
dump 2 /run/err2.log /run/ev2.json

echo "==== guest done at $(up) s uptime"
off
