#!/usr/bin/env bash
# make kernels: runs eaddr's kernel checks on each kernel of a matrix and prints one line per kernel,
# `kernel <release> <arch>: N passed, M failed`, plus the failing checks; exits 1 on any failure.
#
#   host             the machine's own kernel, no VM: the scenario of guest-init.sh in its own mount,
#                    net and UTS namespaces, then the Go kernel tests directly on the host
#   debian12-amd64   the newest linux-image-6.1.0-N-amd64-unsigned Debian serves, qemu-system-x86_64
#   debian12-arm64   the newest linux-image-6.1.0-N-arm64-unsigned, qemu-system-aarch64 (-M virt),
#                    with GOARCH=arm64 binaries: the committed arm64 BPF objects are loaded there
#
# Both VMs run under TCG (no KVM) with no network device; one VM at a time. The guest sees the host
# root read-only over 9p: the amd64 guest switch_roots into it, the arm64 guest (which cannot run
# the host's x86 programs) stays in its busybox-static:arm64 initramfs and bind-mounts from the share
# only what is arch-independent or built for it (the repository, the work directory, /etc, the
# kernel's module tree). Every binary the guests run is built here, on the host: eaddr, the
# bind-failure client, the Go test binaries (`go test -c`) of the kernel-tier packages. Which tests
# run where is testdata/kernels/tests.txt. testdata/kernels/check.py judges each entry's output.
#
# Run as root from the repository root (make kernels). Arguments or KERNELS choose entries (default
# all three). Downloads (the kernel packages, busybox-static:arm64) are cached in KERNELS_CACHE
# (/var/cache/eaddr-kernels) with their unpacked, depmod-ed module trees, so a second run fetches
# nothing. KERNELS_TIMEOUT_AMD64 / KERNELS_TIMEOUT_ARM64 bound each VM (seconds). KERNELS_TESTS names
# another test list than testdata/kernels/tests.txt (to try a test on the matrix).
set -euo pipefail

die() { echo "kernels: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (apt-get download, dpkg -x, the namespaces and the BPF programs need it)"
[ -f go.mod ] && [ -f testdata/kernels/guest-init.sh ] || die "run from the repository root"
repo=$(pwd)
case $repo in *[[:space:]]*) die "the repository path must have no spaces (it goes on the kernel command line)" ;; esac

# shellcheck disable=SC2206
entries=(${*:-${KERNELS:-host debian12-amd64 debian12-arm64}})
cache=${KERNELS_CACHE:-/var/cache/eaddr-kernels}
t_amd64=${KERNELS_TIMEOUT_AMD64:-900}
t_arm64=${KERNELS_TIMEOUT_ARM64:-1800}
want_amd64= want_arm64=
for e in "${entries[@]}"; do
	case $e in
	host | debian12-amd64) want_amd64=1 ;;
	debian12-arm64) want_arm64=1 ;;
	*) die "unknown entry $e (host, debian12-amd64, debian12-arm64)" ;;
	esac
done

missing=
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
need cpio cpio
need python3 python3
need apt-get apt
need dpkg dpkg
need depmod kmod
need unshare util-linux
need go 'go(PATH)'
case " ${entries[*]} " in *" debian12-amd64 "*)
	need qemu-system-x86_64 qemu-system-x86
	need /usr/sbin/modprobe kmod ;;
esac
# the host entry and the amd64 guest run the host's busybox-static; the arm64 guest Debian's arm64 one
[ -z "$want_amd64" ] || { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || missing="$missing busybox-static(/bin/busybox,static)"
[ -z "$want_arm64" ] || need qemu-system-aarch64 qemu-system-arm
[ -z "$missing" ] || die "missing:$missing (apt-get install qemu-system-x86 qemu-system-arm busybox-static cpio kmod)"

work=$(mktemp -d /tmp/eaddr-kernels.XXXXXX)
qpid= tpid=
cleanup() { # stops qemu (timeout passes the signal on) and the console tail, removes $work
	set +e
	[ -z "$qpid" ] || kill "$qpid" 2>/dev/null
	[ -z "$tpid" ] || kill "$tpid" 2>/dev/null
	[ -z "$qpid" ] || wait "$qpid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
chmod 755 "$work"   # the guest reads it over 9p
mkdir -p "$cache"
start=$(date +%s)
secs() { echo $(($(date +%s) - $1)); }

# ---- packages: newest candidate of a name pattern, downloaded once into the cache
# fetch PACKAGE[:ARCH]: prints the cached .deb, downloading it only when that version is not there.
fetch() {
	local name=${1%%:*} arch= ver deb
	[ "$1" = "$name" ] || arch=${1#*:}
	ver=$(apt-cache policy "$1" | awk '/Candidate:/{print $2}')
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || die "no candidate for $1 in the apt lists (apt-get update?)"
	arch=${arch:-$(apt-cache show "$1=$ver" | awk '/^Architecture:/{print $2; exit}')}
	deb="$cache/${name}_${ver//:/%3a}_${arch}.deb"
	if [ ! -s "$deb" ]; then
		echo "== download $1 $ver" >&2
		mkdir -p "$cache/dl" && { chown _apt "$cache/dl" 2>/dev/null || true; }
		(cd "$cache/dl" && timeout 600 apt-get download -q "$1=$ver" >/dev/null) || die "apt-get download $1=$ver failed"
		mv "$cache/dl/${name}_"*"_${arch}.deb" "$deb"
		rmdir "$cache/dl" 2>/dev/null || true
	fi
	echo "$deb"
}

# kernel ARCH: sets kpkg, kver, kroot (the unpacked package, with modules.dep from depmod).
kernel() {
	kpkg=$(apt-cache search --names-only "^linux-image-6\\.1\\.0-[0-9]+-$1-unsigned\$" | cut -d' ' -f1 | sort -V | tail -n1)
	[ -n "$kpkg" ] || die "no linux-image-6.1.0-*-$1-unsigned in the apt lists (Debian 12 sources; for arm64 dpkg --add-architecture arm64 and apt-get update)"
	kver=${kpkg#linux-image-}; kver=${kver%-unsigned}
	local deb
	deb=$(fetch "$kpkg:$1")
	kroot=${deb%.deb}
	if [ ! -f "$kroot/.unpacked" ]; then
		rm -rf "$kroot"
		dpkg -x "$deb" "$kroot"
		depmod -b "$kroot" "$kver"   # the package has no modules.dep: depmod makes it at install
		touch "$kroot/.unpacked"
	fi
	[ -f "$kroot/boot/vmlinuz-$kver" ] || die "no boot/vmlinuz-$kver in $kpkg"
	[ -f "$kroot/lib/modules/$kver/modules.dep" ] || die "depmod made no modules.dep for $kver"
	echo "== kernel $kpkg ($(basename "$deb"), unpacked in $kroot)"
}

# ---- binaries, built on the host for each architecture the matrix needs
# tests.txt: PACKAGE TEST WHERE [WHY]; WHERE is all, amd64 (host and the amd64 guest) or host.
tests=${KERNELS_TESTS:-testdata/kernels/tests.txt}
[ -f "$tests" ] || die "no test list $tests"
pkgs=$(awk '!/^#/ && NF {print $1}' "$tests" | sort -u)
build() { # ARCH
	local d=$work/$1 p
	echo "== build for $1: eaddr, bindfail, go test -c of $(echo $pkgs)"
	mkdir -p "$d/tests" "$d/bin"
	GOARCH=$1 CGO_ENABLED=0 go build -trimpath -o "$d/eaddr" ./cmd/eaddr
	GOARCH=$1 CGO_ENABLED=0 go build -trimpath -o "$d/bindfail" ./testdata/kernels/bindfail
	for p in $pkgs; do
		GOARCH=$1 CGO_ENABLED=0 go test -c -o "$d/tests/${p//\//_}.test" "./$p"
	done
	# cmd/eaddr's TestMain runs `go build -o OUT .`; in the guests this stands in for it with the
	# eaddr just built here (compiling eaddr under TCG takes most of 15 minutes).
	cat > "$d/bin/go" <<EOF
#!/bin/sh
# make kernels: stands in for cmd/eaddr TestMain's \`go build -o OUT .\` with the eaddr built on the host.
out=
while [ \$# -gt 0 ]; do [ "\$1" = -o ] && out=\$2; shift; done
[ -n "\$out" ] || { echo "go (make kernels stand-in): only go build -o OUT ." >&2; exit 2; }
exec cp $d/eaddr "\$out"
EOF
	chmod 755 "$d/bin/go"
}
# gotests ARCH FILE host|vm: the lines `PKGDIR TESTBIN REGEX` for guest-init.sh.
gotests() {
	local p sel
	: > "$2"
	for p in $pkgs; do
		sel=$(awk -v p="$p" -v a="$1" -v m="$3" '!/^#/ && $1 == p && ($3 == "all" || $3 == a || $3 == m) {print $2}' "$tests" | paste -sd'|')
		[ -z "$sel" ] || echo "$p ${p//\//_}.test ^($sel)\$" >> "$2"
	done
}
# the guests run a copy: an edit of the checkout during a run does not reach a running guest
cp testdata/kernels/guest-init.sh "$work/guest-init.sh"
schemacheck=$work/schemacheck
CGO_ENABLED=0 go build -o "$schemacheck" ./testdata/kernels/schemacheck
[ -z "$want_amd64" ] || build amd64
[ -z "$want_arm64" ] || build arm64

# modorder DIR: the modules in DIR (*.ko), each after the ones its .modinfo depends= names.
modorder() {
	local -A deps=() loaded=()
	local m f left progress
	for f in "$1"/*.ko; do
		m=$(basename "$f" .ko)
		deps[$m]=$(tr '\0' '\n' < "$f" | sed -n 's/^depends=//p' | tr ',' ' ')
	done
	for m in "${!deps[@]}"; do
		for f in ${deps[$m]}; do [ -n "${deps[$f]+x}" ] || die "module $m needs $f, not in the initramfs list"; done
	done
	left=${#deps[@]}
	while [ "$left" -gt 0 ]; do
		progress=
		for m in "${!deps[@]}"; do
			[ -z "${loaded[$m]+x}" ] || continue
			for f in ${deps[$m]}; do [ -n "${loaded[$f]+x}" ] || continue 2; done
			echo "$m"; loaded[$m]=1; left=$((left - 1)); progress=1
		done
		[ -n "$progress" ] || die "module dependency cycle among: ${!deps[*]}"
	done
}

# mkinitramfs BUSYBOX MODULES_DIR OUT: busybox-static and the virtio/9p modules of the kernel
# package. Its /init loads them and mounts the host root over 9p read-only; then, with
# switch_root=1 on the kernel command line, it switch_roots into it (amd64), or else bind-mounts
# the directories named by binds= (a:b:c) from the share onto the same paths in the initramfs and
# the kernel's module tree (modules=) onto /lib/modules (arm64). Then it runs the script guest_init=.
mkinitramfs() {
	local d=$work/initramfs m
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/mods" "$d/proc" "$d/sys" "$d/dev" "$d/newroot" "$d/host" "$d/etc" "$d/lib/modules" "$d/tmp" "$d/run"
	cp "$1" "$d/bin/busybox"
	for m in drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko \
		drivers/virtio/virtio_pci_modern_dev.ko drivers/virtio/virtio_pci_legacy_dev.ko \
		drivers/virtio/virtio_pci.ko fs/netfs/netfs.ko fs/fscache/fscache.ko \
		net/9p/9pnet.ko net/9p/9pnet_virtio.ko fs/9p/9p.ko; do
		if [ -f "$2/$m" ]; then
			cp "$2/$m" "$d/mods/"
		else   # built in on some architectures (virtio, virtio_ring on arm64)
			grep -qx "kernel/$m" "$2/../modules.builtin" || die "no module $m in the kernel package, nor built in"
		fi
	done
	modorder "$d/mods" > "$d/mods/order"
	cat > "$d/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do
	insmod /mods/$m.ko || echo "initramfs: insmod $m failed"
done
gi= sw= binds= mods=
for a in $(cat /proc/cmdline); do
	case $a in guest_init=*) gi=${a#guest_init=};; switch_root=1) sw=1;; binds=*) binds=${a#binds=};; modules=*) mods=${a#modules=};; esac
done
r=/host; [ -z "$sw" ] || r=/newroot
i=0
until mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose root $r; do
	i=$((i+1))
	if [ $i -gt 50 ]; then echo "initramfs: 9p mount failed"; echo o > /proc/sysrq-trigger; sleep 30; fi
	sleep 0.2
done
if [ -n "$sw" ]; then
	umount /dev /sys /proc
	exec switch_root /newroot "$gi"
fi
for b in $(echo "$binds" | tr : ' '); do
	mkdir -p "$b" && mount --bind "/host$b" "$b" || echo "initramfs: bind $b failed"
done
[ -z "$mods" ] || mount --bind "/host$mods" /lib/modules || echo "initramfs: bind $mods on /lib/modules failed"
umount /dev /sys /proc
exec /bin/busybox sh "$gi"
INIT
	chmod +x "$d/init"
	(cd "$d" && find . | cpio -o -H newc --quiet | gzip -1) > "$3"
}

uuid() { cat /proc/sys/kernel/random/uuid; }
hex64() { echo "$(uuid)$(uuid)" | tr -d '-'; }
results=()
failed=0

# judge MODE LOG RC KVER ARCH PARAMS...: check.py on one entry's output
judge() {
	local mode=$1; shift
	local out rc=0
	out=$(python3 testdata/kernels/check.py --schemacheck "$schemacheck" --schema docs/event.schema.json \
		--tests "$tests" --mode "$mode" "$@") || rc=$?
	echo "$out"
	results+=("$(echo "$out" | sed -n '/^kernel .*passed.*failed$/,$p')")
	[ "$rc" = 0 ] || failed=1
}

# ---- host: the machine's kernel, no VM
run_host() {
	local t0 d=$work/host rc=0 pod1 cid1 pod2 cid2 cgbase params
	t0=$(date +%s)
	# the Go tests keep TMPDIR (/tmp): cmd/eaddr's C clients are found again by argv[0] after they
	# exit, and eaddr keeps 64 bytes of it (EADDR_ARGS_MAX): a longer TMPDIR cuts their path
	mkdir -p "$d"
	pod1=$(uuid) cid1=$(hex64) pod2=$(uuid) cid2=$(hex64) cgbase=eaddr-k$(uuid | cut -c1-8)
	gotests amd64 "$work/amd64/gotests" host
	params="mode=host kdir=$work/amd64 repo=$repo cgbase=$cgbase pod1=$pod1 cid1=$cid1 pod2=$pod2 cid2=$cid2"
	echo "== host: kernel $(uname -r) $(uname -m), no VM: the scenario in its own mount/net/UTS namespaces, then the Go kernel tests"
	# the scenario mounts its own proc, sysfs, cgroup2, tracefs, tmpfs on /run: private mounts
	KERNELS_PARAMS="$params" KERNELS_PHASE=scenario timeout "$t_amd64" \
		unshare --mount --net --uts --propagation private /bin/sh "$work/guest-init.sh" >"$d/console.log" 2>&1 || rc=$?
	[ "$rc" = 0 ] || echo "==== scenario exited $rc" >>"$d/console.log"
	KERNELS_PARAMS="$params" KERNELS_PHASE=gotests timeout "$t_amd64" \
		/bin/sh "$work/guest-init.sh" >>"$d/console.log" 2>&1 || rc=$?
	cat "$d/console.log"
	echo "== host: $(secs "$t0") s"
	judge host "$d/console.log" "$rc" "$(uname -r)" "$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')" "$cgbase" "$pod1" "$cid1" "$pod2" "$cid2"
}

# ---- a Debian 12 kernel under qemu
run_vm() { # ARCH
	local arch=$1 t0 d=$work/vm-$1 rc=0 pod1 cid1 pod2 cid2 cgbase timeout bb append qemu
	t0=$(date +%s)
	kernel "$arch"
	mkdir -p "$d"
	gotests "$arch" "$work/$arch/gotests" vm
	# the kernel runs this when it wants a module (request_module): inet_diag, tcp_diag, ...
	if [ "$arch" = amd64 ]; then
		bb=/bin/busybox
		printf '#!/bin/sh\nexec /usr/sbin/modprobe -d %s "$@"\n' "$kroot" > "$work/$arch/modprobe"
	else
		local bbdeb
		bbdeb=$(fetch busybox-static:arm64)
		rm -rf "$work/bb-arm64" && dpkg -x "$bbdeb" "$work/bb-arm64"
		bb=$work/bb-arm64/bin/busybox
		printf '#!/bin/busybox sh\nexec /bin/busybox modprobe "$@"\n' > "$work/$arch/modprobe"
	fi
	chmod 755 "$work/$arch/modprobe"
	mkinitramfs "$bb" "$kroot/lib/modules/$kver/kernel" "$d/initramfs.cpio.gz"
	pod1=$(uuid) cid1=$(hex64) pod2=$(uuid) cid2=$(hex64) cgbase=eaddr-k$(uuid | cut -c1-8)
	append="panic=-1 quiet loglevel=4 guest_init=$work/guest-init.sh mode=vm kdir=$work/$arch repo=$repo cgbase=$cgbase pod1=$pod1 cid1=$cid1 pod2=$pod2 cid2=$cid2"
	if [ "$arch" = amd64 ]; then
		timeout=$t_amd64
		qemu=(qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 2048)
		append="console=ttyS0 switch_root=1 $append"
	else
		timeout=$t_arm64
		# neoverse-n1: the core of Graviton2 and Ampere Altra. thread=single: one host thread runs
		# both vCPUs in turn. With qemu's multi-threaded TCG, 9 of 23 boots on 2026-12-01 missed
		# every syscall of one process for a while (an event that never came), and 0 of 10 with
		# thread=single; the amd64 guest never. docs/testing.md "Other kernels" says what is known.
		qemu=(qemu-system-aarch64 -accel tcg,thread=single -M virt -cpu neoverse-n1 -smp 2 -m 2048)
		append="console=ttyAMA0 binds=/etc:$repo:$work modules=$kroot/lib/modules $append"
	fi
	echo "== boot $kver ($arch) under qemu (TCG, -nic none, at most $timeout s)"
	timeout "$timeout" "${qemu[@]}" -nographic -no-reboot -nic none \
		-kernel "$kroot/boot/vmlinuz-$kver" -initrd "$d/initramfs.cpio.gz" \
		-virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
		-append "$append" </dev/null >"$d/console.log" 2>&1 &
	qpid=$!
	tail -n +1 --pid="$qpid" -f "$d/console.log" &   # the console, live; ends with qemu
	tpid=$!
	wait "$qpid" || rc=$?   # a wait, not a foreground command, so INT/TERM act at once
	qpid=
	wait "$tpid" || true
	tpid=
	echo "== qemu ($arch) exited $rc after $(secs "$t0") s"
	judge vm "$d/console.log" "$rc" "$kver" "$arch" "$cgbase" "$pod1" "$cid1" "$pod2" "$cid2"
}

for e in "${entries[@]}"; do
	case $e in
	host) run_host ;;
	debian12-amd64) run_vm amd64 ;;
	debian12-arm64) run_vm arm64 ;;
	esac
done

echo
echo "== make kernels: ${#entries[@]} kernels in $(secs "$start") s"
printf '%s\n' "${results[@]}"
exit "$failed"
