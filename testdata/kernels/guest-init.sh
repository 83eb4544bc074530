#!/bin/busybox sh
# The kernel side of make kernels (testdata/kernels/run.sh): PID 1 inside the qemu guests (the
# host root over 9p, read-only; no network device), or, for the host entry, a script run twice
# by run.sh: KERNELS_PHASE=scenario inside unshare --mount --net --uts, then KERNELS_PHASE=gotests.
#
# The scenario: eaddr against two bind() failures from kubepods-style cgroups that are removed
# right after their process exits (EADDRNOTAVAIL in this netns, EADDRINUSE in a netns of its own),
# then against a loopback connect with --nodeport-collisions. The Go tests: the test binaries built
# on the host, each with the tests testdata/kernels/tests.txt selects for this architecture, with
# EADDR_REQUIRE_BPF=1 and EADDR_KERNEL_LACKS set to lacks=. On a kernel too old for eaddr (lacks=
# names what it lacks) the scenario is only eaddr's refusal: with BTF hidden, then as it is.
# Everything is printed between ==== markers for check.py; in a guest it then powers off.
# Parameters come from the kernel command line (KERNELS_PARAMS on the host): mode= (vm|host), kdir=
# (the binaries of the architecture), edir= (the entry's own: its gotests list and modprobe), repo=, cgbase=, pod1=, cid1=, pod2=, cid2=, lacks= (optional). Every wait has a deadline.
B=/bin/busybox
if [ $$ = 1 ]; then
	# a guest's PID 1: its own /proc first (until then /proc is the host's, over 9p)
	$B mount -t proc proc /proc
	$B mount -t sysfs sysfs /sys
	$B mount -t devtmpfs dev /dev
	params=$($B cat /proc/cmdline)
else
	params=$KERNELS_PARAMS
fi
for a in $params; do
	case $a in
	mode=*) MODE=${a#mode=} ;; kdir=*) K=${a#kdir=} ;; edir=*) EDIR=${a#edir=} ;; repo=*) REPO=${a#repo=} ;; cgbase=*) CGB=${a#cgbase=} ;;
	pod1=*) POD1=${a#pod1=} ;; cid1=*) CID1=${a#cid1=} ;;
	pod2=*) POD2=${a#pod2=} ;; cid2=*) CID2=${a#cid2=} ;;
	lacks=*) LACKS=${a#lacks=} ;;
	esac
done

# off: in a guest, power off (qemu exits with -no-reboot); on the host, only leave this script.
# Only the guests' PID 1, on a kernel booted by run.sh, powers off. PID 1 must not exit while the
# power-off runs (the kernel panics: "Attempted to kill init!"), and it must wait without exec:
# the power-off shuts the 9p device down, and an amd64 guest's programs (sleep included) are the
# host's, over 9p (seen once: "sleep: Input/output error", then the panic). So the shell's own
# read, on the console, which never sends a line, until the power-off ends the guest.
off() {
	if [ $$ = 1 ] && [ "$MODE" = vm ] && $B grep -q 'guest_init=' /proc/cmdline; then
		sync; echo o > /proc/sysrq-trigger
		while :; do read -t 1 _ < /dev/console; done 2>/dev/null
	fi
	exit 0
}
kv() { echo "==== kv $1=$2"; }

if [ $$ = 1 ] || [ "$MODE/$KERNELS_PHASE" = host/scenario ]; then
	# scratch space on /run, not /tmp: the host's work directory (kdir) is under /tmp
	$B mount -t tmpfs run /run
	$B mkdir -p /run/bb /run/home /run/tmp && $B --install -s /run/bb
	export HOME=/run/home TMPDIR=/run/tmp
fi
# the host's PATH after the guest's busybox (the arm64 guest has busybox only)
HOSTPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
[ -d /run/bb ] && export PATH=/run/bb:$HOSTPATH || export PATH=$HOSTPATH

if [ -z "$MODE" ] || [ -z "$K" ] || [ -z "$EDIR" ] || [ -z "$REPO" ] || [ -z "$CGB" ] || [ -z "$POD1" ] || [ -z "$CID1" ] || [ -z "$POD2" ] || [ -z "$CID2" ]; then
	echo "==== guest: missing parameters: $params"
	off
fi
up() { cut -d' ' -f1 /proc/uptime; }

if [ $$ = 1 ]; then
	# cgroup v2 only, as on a production node (no v1 hierarchy is mounted, so every controller
	# is v2's); the root hands its controllers down as systemd does at boot, so that a cgroup
	# that hands them on (kubepods.slice and the slices below it) can hold no process itself
	mount -t cgroup2 cgroup2 /sys/fs/cgroup
	for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
		echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control || echo "==== cannot enable the $c controller"
	done
	mount -t tracefs tracefs /sys/kernel/tracing
	mount -t debugfs debugfs /sys/kernel/debug
	mount -t bpf bpf /sys/fs/bpf
	# the kernel runs this to load a module (inet_diag, tcp_diag, ... for sock_diag): the
	# kernel package's own tree, depmod-ed on the host (run.sh writes the script per arch)
	echo "$EDIR/modprobe" > /proc/sys/kernel/modprobe
	# the CNI plugins of the containerd test keep their results in /var/lib/cni: writable here
	# (the share is read-only), on /var/lib when the host has no /var/lib/cni to mount on
	if [ -d /var/lib/cni ]; then mount -t tmpfs cni /var/lib/cni
	elif [ -d /var/lib ]; then mount -t tmpfs varlib /var/lib && mkdir /var/lib/cni; fi
	kv modprobe "$(cat /proc/sys/kernel/modprobe)"
fi

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

scenario() {
	# the cgroup2 mount: the guest's own; on the host entry, wherever the machine has it (it may
	# be a v1 layout with cgroup2 at /sys/fs/cgroup/unified, and eaddr finds it there)
	CGR=/sys/fs/cgroup
	[ "$MODE" = vm ] || CGR=$(awk '{for (i = 7; i < NF; i++) if ($i == "-") { if ($(i+1) == "cgroup2") { print $5; exit } break }}' /proc/self/mountinfo)
	[ -n "$CGR" ] || echo "==== no cgroup2 mount"
	ip link set lo up
	hostname eaddr-kernels
	echo
	kv uname "$(uname -r)"
	kv cgroup_mounts "$(awk '$3 == "cgroup" || $3 == "cgroup2" { printf "%s%s:%s", s, $3, $2; s = " " }' /proc/mounts)"
	kv cgroup_subtree "$(cat "$CGR/cgroup.subtree_control")"
	kv netns_init "$(readlink /proc/self/ns/net)"
	# run 2 looks at this netns only (--netns): on the host entry, other processes fail too.
	# The host entry shares pid 1 (the host's netns) with the machine: name this netns for
	# --nodeport-collisions; in a guest, pid 1's is this one, eaddr's default.
	me=$(stat -L -c %i /proc/self/ns/net)
	np=
	[ "$MODE" = vm ] || np="--nodeport-netns $me"

	# ---- run 0: no BTF (an empty tmpfs on /sys/kernel/btf, in a mount namespace of its own):
	# eaddr's feature probe must say so in one line and exit 1
	[ -e /sys/kernel/btf/vmlinux ] && kv btf yes || kv btf no
	unshare -m sh -c "mount -t tmpfs nobtf /sys/kernel/btf && exec $K/eaddr trace" >/run/ev0.json 2>/run/err0.log
	kv eaddr_exit_0 $?
	dump 0 /run/err0.log /run/ev0.json
	if [ -n "$LACKS" ]; then
		# ---- run old: a kernel that lacks what eaddr needs: one line that names it, exit 1
		$K/eaddr trace >/run/evold.json 2>/run/errold.log
		kv eaddr_exit_old $?
		dump old /run/errold.log /run/evold.json
		echo "==== scenario done at $(up) s uptime"
		return
	fi

	# ---- run 1: bind() failures from pod-like cgroups removed right after their process exits.
	# --flush-interval 3s: eaddr reads the ring at most every 3 s, so it usually reads the events
	# after the cgroups are gone and their paths can come only from the BPF map cgroup_paths.
	# --cgroup: on the host entry, other processes fail too; the prefix keeps the run's own.
	t0=$(up)
	$K/eaddr trace --errno all --cgroup "/$CGB/" --diagnose=false --explain off --summary-interval 0 --flush-interval 3s \
		>/run/ev1.json 2>/run/err1.log &
	E=$!
	if wait_attached /run/err1.log 120 $E; then
		echo "==== run 1 attached ($t0 -> $(up) s uptime)"
		CG1=$CGR/$CGB/kubepods/besteffort/pod$POD1/$CID1
		mkdir -p "$CG1"
		sh -c "echo \$\$ > $CG1/cgroup.procs && exec $K/bindfail notavail"
		kv bindfail_1 $?
		rmdir "$CG1" && kv removed_1 "${CG1#$CGR}"
		CG2=$CGR/$CGB/kubepods/burstable/pod$POD2/$CID2
		mkdir -p "$CG2"
		sh -c "echo \$\$ > $CG2/cgroup.procs && exec unshare -n sh -c 'ip link set lo up && echo \"==== kv netns_2=\$(readlink /proc/self/ns/net)\" && exec $K/bindfail inuse'"
		kv bindfail_2 $?
		rmdir "$CG2" && kv removed_2 "${CG2#$CGR}"
		kv cgroups_left "$(find $CGR/$CGB -mindepth 4 -type d | wc -l)"
		wait_lines /run/ev1.json 2 30
	fi
	stop_eaddr $E 1
	find $CGR/$CGB -depth -type d -exec rmdir {} \; 2>/dev/null
	dump 1 /run/err1.log /run/ev1.json

	# ---- run 2: --nodeport-collisions loads; a loopback connect from a port in 30000-30011
	t0=$(up)
	# shellcheck disable=SC2086
	$K/eaddr trace --nodeport-collisions --netns "$me" $np --diagnose=false --explain off --summary-interval 0 \
		>/run/ev2.json 2>/run/err2.log &
	E=$!
	if wait_attached /run/err2.log 120 $E; then
		echo "==== run 2 attached ($t0 -> $(up) s uptime)"
		old=$(cat /proc/sys/net/ipv4/ip_local_port_range)
		echo "30000 30011" > /proc/sys/net/ipv4/ip_local_port_range
		nc -l -p 8080 >/dev/null &
		L=$!
		sleep 0.5
		echo hi | timeout 5 nc 127.0.0.1 8080
		kill $L 2>/dev/null
		echo "$old" > /proc/sys/net/ipv4/ip_local_port_range
		wait_lines /run/ev2.json 1 30
	fi
	stop_eaddr $E 2
	dump 2 /run/err2.log /run/ev2.json
	echo "==== scenario done at $(up) s uptime"
}

# gotests: each line of $EDIR/gotests is `PKGDIR TESTBIN REGEX`; the binary runs in its package's
# directory, as go test runs it, with the eaddr built on the host as eaddrtest.Main's binary
# (EADDR_TEST_BIN: compiling eaddr under TCG would take most of 15 minutes).
gotests() {
	# the tests look their clients up by name: the host's (GNU wget, OpenBSD nc), not the
	# busybox applets of /run/bb; the arm64 guest's applets are in its initramfs's /bin
	PATH=$HOSTPATH
	if command -v python3 >/dev/null; then
		t0=$(up); python3 -c 'import socket, resource, sys, time'; t1=$(up); python3 -c 'import socket'
		kv python3_start "first $t0 -> $t1, again -> $(up) s uptime"
	fi
	while read -r pkg bin re; do
		echo "==== BEGIN gotest $pkg $re"
		t0=$(up)
		(cd "$REPO/$pkg" && EADDR_REQUIRE_BPF=1 EADDR_KERNEL_LACKS=$LACKS EADDR_TEST_BIN=$K/eaddr "$K/tests/$bin" -test.v -test.count=1 \
			-test.timeout=20m -test.run "$re" 2>&1)
		echo "==== END gotest $pkg rc=$? $t0 -> $(up) s uptime"
	done < "$EDIR/gotests"
	kv modules "$(cut -d' ' -f1 /proc/modules | sort | tr '\n' ' ')"
	echo "==== gotests done at $(up) s uptime"
}

case $MODE/$KERNELS_PHASE in
host/scenario) scenario ;;
host/gotests) gotests ;;
vm/*) scenario; gotests; echo "==== guest done at $(up) s uptime" ;;
esac
off
