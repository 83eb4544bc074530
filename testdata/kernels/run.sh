#!/usr/bin/env bash
# Boots the newest Linux 6.1 kernel package Debian serves for amd64 under qemu (TCG, no network
# device) and checks that eaddr's BPF programs load and report there: the guest
# (testdata/kernels/guest-init.sh) sees the host root read-only over 9p and runs the freshly
# built eaddr against bind() failures from removed pod-like cgroups and a NodePort-range connect;
# check.py checks the console strictly. Run as root from the repository root (make test-kernels).
# Needs apt-get/dpkg, qemu-system-x86, busybox-static, cpio, gcc, go, python3.
# KERNELS_TIMEOUT (seconds, default 300) bounds the VM.
set -euo pipefail

die() { echo "test-kernels: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (apt-get download, dpkg -x and the guest's files need it)"
[ -f go.mod ] && [ -f testdata/kernels/guest-init.sh ] || die "run from the repository root"
repo=$(pwd)
case $repo in *[[:space:]]*) die "the repository path must have no spaces (it goes on the kernel command line)" ;; esac

missing=
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
need qemu-system-x86_64 qemu-system-x86
need cpio cpio
need gcc gcc
need python3 python3
need apt-get apt
need dpkg dpkg
need go 'go(PATH)'
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || missing="$missing busybox-static(/bin/busybox,static)"
[ -z "$missing" ] || die "missing:$missing (apt-get install qemu-system-x86 busybox-static cpio)"

work=$(mktemp -d /tmp/eaddr-kernels.XXXXXX)
qpid= tpid=
cleanup() { # stops qemu (timeout passes the signal on) and the console tail, removes $work
	set +e
	[ -z "$qpid" ] || kill "$qpid" 2>/dev/null
	[ -z "$tpid" ] || kill "$tpid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
chmod 755 "$work"   # the guest reads it over 9p
mkdir "$work/dl" && { chown _apt "$work/dl" 2>/dev/null || true; }   # apt-get download runs as _apt
start=$(date +%s)

# modorder DIR: the modules in DIR (*.ko), each after the ones its .modinfo depends= names (the
# package has no modules.dep; depmod makes it at install). Fails when a dependency is not in DIR.
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

# mkinitramfs MODULES_DIR OUT: busybox-static and the virtio/9p modules of the kernel package;
# its /init loads them, mounts the host root over 9p read-only and switch_roots into the script
# named by guest_init= on the kernel command line.
mkinitramfs() {
	local d=$work/initramfs m
	mkdir -p "$d/bin" "$d/mods" "$d/proc" "$d/sys" "$d/dev" "$d/newroot"
	cp /bin/busybox "$d/bin/busybox"
	for m in drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko \
		drivers/virtio/virtio_pci_modern_dev.ko drivers/virtio/virtio_pci_legacy_dev.ko \
		drivers/virtio/virtio_pci.ko fs/netfs/netfs.ko fs/fscache/fscache.ko \
		net/9p/9pnet.ko net/9p/9pnet_virtio.ko fs/9p/9p.ko; do
		[ -f "$1/$m" ] || die "no module $m in the kernel package (built in or renamed?)"
		cp "$1/$m" "$d/mods/"
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
gi=
for a in $(cat /proc/cmdline); do case $a in guest_init=*) gi=${a#guest_init=};; esac; done
i=0
until mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 root /newroot; do
	i=$((i+1))
	if [ $i -gt 50 ]; then echo "initramfs: 9p mount failed"; echo o > /proc/sysrq-trigger; sleep 30; fi
	sleep 0.2
done
umount /dev /sys /proc
exec switch_root /newroot "$gi"
INIT
	chmod +x "$d/init"
	(cd "$d" && find . | cpio -o -H newc --quiet | gzip -1) > "$2"
}

# ---- the kernel: newest linux-image-6.1.0-N-amd64-unsigned, downloaded and extracted, not installed
pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' | cut -d' ' -f1 | sort -V | tail -n1)
[ -n "$pkg" ] || die "no linux-image-6.1.0-*-amd64-unsigned package in the apt lists (Debian 12 sources, apt-get update?)"
kver=${pkg#linux-image-}; kver=${kver%-unsigned}
echo "== kernel package $pkg ($(apt-cache policy "$pkg" | awk '/Candidate:/{print $2}'))"
(cd "$work/dl" && timeout 600 apt-get download -q "$pkg" >/dev/null)
dpkg -x "$work/dl/$pkg"_*.deb "$work/k"
rm -rf "$work/dl"
vmlinuz=$work/k/boot/vmlinuz-$kver
mods=$work/k/lib/modules/$kver/kernel
[ -f "$vmlinuz" ] || die "no $vmlinuz in $pkg"

# ---- the binaries the guest runs
echo "== build eaddr and the bind-failure client"
CGO_ENABLED=0 go build -trimpath -o "$work/eaddr" ./cmd/eaddr
gcc -static -O2 -Wall -o "$work/bindfail" testdata/kernels/bindfail.c

# ---- the initramfs: busybox, the virtio/9p modules of the package; /init mounts / over 9p
mkinitramfs "$mods" "$work/initramfs.cpio.gz"

# ---- boot; random pod UIDs, container IDs and cgroup base name for this run
uuid() { cat /proc/sys/kernel/random/uuid; }
hex64() { echo "$(uuid)$(uuid)" | tr -d '-'; }
pod1=$(uuid) cid1=$(hex64) pod2=$(uuid) cid2=$(hex64) cgbase=eaddr-k$(uuid | cut -c1-8)
timeout=${KERNELS_TIMEOUT:-300}
echo "== boot $kver under qemu (TCG, -nic none, at most $timeout s)"
timeout "$timeout" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1024 \
	-nographic -no-reboot -nic none \
	-kernel "$vmlinuz" -initrd "$work/initramfs.cpio.gz" \
	-virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
	-append "console=ttyS0 panic=-1 quiet loglevel=4 guest_init=$repo/testdata/kernels/guest-init.sh kdir=$work cgbase=$cgbase pod1=$pod1 cid1=$cid1 pod2=$pod2 cid2=$cid2" \
	</dev/null >"$work/console.log" 2>&1 &
qpid=$!
tail -n +1 --pid="$qpid" -f "$work/console.log" &   # the console, live; ends with qemu
tpid=$!
rc=0
wait "$qpid" || rc=$?   # a wait, not a foreground command, so INT/TERM act at once
qpid=
wait "$tpid" || true
tpid=
echo "== qemu exited $rc after $(($(date +%s) - start)) s in all"

python3 testdata/kernels/check.py "$work/console.log" "$rc" "$kver" "$cgbase" "$pod1" "$cid1" "$pod2" "$cid2"
