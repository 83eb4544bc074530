#!/usr/bin/env bash
# make kernels: runs eaddr's kernel checks on each kernel of a matrix and prints one line per kernel,
# `kernel <release> <arch>: N passed, M failed`, plus the failing checks; exits 1 on any failure.
#
#   host             the machine's own kernel, no VM: the scenario of guest-init.sh in its own mount,
#                    net and UTS namespaces, then the Go kernel tests directly on the host
#   host-scenario    the host entry's scenario alone, no Go test: for CI, whose `make test` runs every
#                    one of the host's Go kernel tests (tests.txt's all, amd64 and host rows) already,
#                    as root with EADDR_REQUIRE_BPF=1 and the same CGO_ENABLED=0 build; not in the
#                    default list
#   debian12-amd64   Debian 12 (bookworm): the newest linux-image-6.1.0-N-amd64-unsigned, qemu-system-x86_64
#   debian12-arm64   the newest linux-image-6.1.0-N-arm64-unsigned, qemu-system-aarch64 (-M virt),
#                    with GOARCH=arm64 binaries: the committed arm64 BPF objects are loaded there
#   debian13-amd64   Debian 13 (trixie): the newest linux-image-6.12.N+deb13-amd64-unsigned
#   debian13-arm64   the newest linux-image-6.12.N+deb13-arm64-unsigned, as debian12-arm64
#   debian11-amd64   Debian 11 (bullseye): the newest linux-image-5.10.0-N-amd64-unsigned. Too old
#                    for eaddr (no bpf_get_current_task_btf, 5.11, nor bpf_task_pt_regs, 5.15): the
#                    entry checks that eaddr refuses in one line naming the first, and that the real
#                    feature probes say what that kernel lacks (tracer's TestProbeThisKernel)
#
# The VMs run under TCG (no KVM) with no network device, KERNELS_JOBS of them at a time (default 1;
# each is one host thread: thread=single TCG). The guest sees the host
# root read-only over 9p: the amd64 guests switch_root into it, the arm64 guests (which cannot run
# the host's x86 programs) stay in their busybox-static:arm64 initramfs and bind-mount from the
# share only what is arch-independent or built for them (the repository, the work directory, /etc,
# the kernel's module tree). Every binary the guests run is built here, on the host: eaddr, the
# bind-failure client, the Go test binaries (`go test -c`) of the kernel-tier packages. Which tests
# run where is testdata/kernels/tests.txt. testdata/kernels/check.py judges each entry's output.
#
# Run as root from the repository root (make kernels). Arguments or KERNELS choose entries (default
# all six). The kernel packages and busybox-static:arm64 are found and fetched through a private apt
# setup per Debian release in KERNELS_CACHE (/var/cache/eaddr-kernels/apt/<release>: its own sources
# list, package lists and cache; the host's apt configuration is neither used for sources nor
# changed), with `apt-get update` at each run (nothing is fetched when the lists are current; when
# it fails, the lists there are used) and `apt-get download`. The .debs are kept in KERNELS_CACHE with
# their unpacked, depmod-ed module trees, so a second run downloads no package.
# Every kernel package is found and fetched first, then the binaries built, then the entries run.
# KERNELS_FETCHED names a file to create once that is done: CI starts its tests, which trace every
# connect() of the machine, only after it, so that no apt connection happens beside them.
# KERNELS_TIMEOUT_AMD64 / KERNELS_TIMEOUT_ARM64 bound each VM (seconds). KERNELS_TESTS names another
# test list than testdata/kernels/tests.txt (to try a test on the matrix). With KERNELS_JOBS above 1,
# each entry's output is printed whole as it ends (not the console live); the last lines, one per
# kernel, are in the list's order.
set -euo pipefail

die() { echo "kernels: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (apt-get download, dpkg -x, the namespaces and the BPF programs need it)"
[ -f go.mod ] && [ -f testdata/kernels/guest-init.sh ] || die "run from the repository root"
repo=$(pwd)
case $repo in *[[:space:]]*) die "the repository path must have no spaces (it goes on the kernel command line)" ;; esac

# The matrix: ENTRY (its name ends in its architecture) -> Debian release (whose kernel package
# version pattern is E_KVER's), the tests.txt WHERE tags it runs, and what its kernel lacks of
# eaddr's needs (EADDR_KERNEL_LACKS for tracer's TestProbeThisKernel; non-empty: the entry checks
# eaddr's refusal instead of the scenario).
declare -A E_SUITE=([debian12-amd64]=bookworm [debian12-arm64]=bookworm [debian13-amd64]=trixie
	[debian13-arm64]=trixie [debian11-amd64]=bullseye)
declare -A E_KVER=([bookworm]='6\.1\.0-[0-9]+' [trixie]='6\.12\.[0-9]+\+deb13(\.[0-9]+)?' [bullseye]='5\.10\.0-[0-9]+')
declare -A E_TAGS=([host]=all,amd64,host [host-scenario]=none [debian12-amd64]=all,amd64,ipvs,guest
	[debian12-arm64]=all [debian13-amd64]=all,amd64,ipvs,guest [debian13-arm64]=all [debian11-amd64]=old)
declare -A E_LACKS=([debian11-amd64]=bpf_get_current_task_btf,bpf_task_pt_regs)
all_entries="host debian12-amd64 debian12-arm64 debian13-amd64 debian13-arm64 debian11-amd64"
# shellcheck disable=SC2206
entries=(${*:-${KERNELS:-$all_entries}})
cache=${KERNELS_CACHE:-/var/cache/eaddr-kernels}
t_amd64=${KERNELS_TIMEOUT_AMD64:-900}
t_arm64=${KERNELS_TIMEOUT_ARM64:-1800}
jobs=${KERNELS_JOBS:-1}
case $jobs in [1-9]|[1-9][0-9]) ;; *) die "KERNELS_JOBS=$jobs: a number of VMs at a time, 1 or more" ;; esac
want_amd64= want_arm64= want_vm_amd64=
declare -A arch_tags=()   # ARCH -> the tests.txt tags of its entries (comma-separated): what to build
for e in "${entries[@]}"; do
	[ -n "${E_TAGS[$e]+x}" ] || die "unknown entry $e ($all_entries host-scenario)"
	case $e in
	host | host-scenario) want_amd64=1; a=amd64 ;;
	*-amd64) want_amd64=1 want_vm_amd64=1; a=amd64 ;;
	*-arm64) want_arm64=1; a=arm64 ;;
	esac
	arch_tags[$a]=${arch_tags[$a]:+${arch_tags[$a]},}${E_TAGS[$e]}
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
if [ -n "$want_vm_amd64" ]; then
	need qemu-system-x86_64 qemu-system-x86
	need /usr/sbin/modprobe kmod
fi
need xz xz-utils   # trixie's modules are .ko.xz
# the host entry and the amd64 guests run the host's busybox-static; the arm64 guests Debian's arm64 one
[ -z "$want_amd64" ] || { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || missing="$missing busybox-static(/bin/busybox,static)"
[ -z "$want_arm64" ] || need qemu-system-aarch64 qemu-system-arm
[ -z "$missing" ] || die "missing:$missing (sudo make deps installs them)"

work=$(mktemp -d /tmp/eaddr-kernels.XXXXXX)
qpid= tpid=
declare -A running=()   # pid of an entry run in the background (KERNELS_JOBS > 1) -> entry
cleanup() { # stops qemu (timeout passes the signal on), the console tail and running entries, removes $work
	set +e
	[ -z "$qpid" ] || kill "$qpid" 2>/dev/null
	[ -z "$tpid" ] || kill "$tpid" 2>/dev/null
	[ -z "$qpid" ] || wait "$qpid" 2>/dev/null
	for p in "${!running[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${!running[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
chmod 755 "$work"   # the guest reads it over 9p
mkdir -p "$cache"
start=$(date +%s)
secs() { echo $(($(date +%s) - $1)); }

# ---- packages: a private apt setup per Debian release, the newest candidate of a name pattern,
# downloaded once into the cache
# aptconf SUITE: writes SUITE's private apt setup in the cache, $cache/apt/SUITE/apt.conf (sources:
# the suite, its -updates and -security, amd64 and arm64, checked with the host's Debian keyring),
# and updates its lists, once per run. The host's own apt sources, lists, status and preferences
# are not read, and the update hooks of the host's apt.conf.d (appstream, packagekit) do not run.
declare -A apt_updated=()
aptconf() {
	local d=$cache/apt/$1 key=/usr/share/keyrings/debian-archive-keyring.gpg
	[ -z "${apt_updated[$1]:-}" ] || return 0
	[ -f "$key" ] || die "no $key (debian-archive-keyring) to check Debian's archive with"
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$d/preferences.d"
	[ -f "$d/status" ] || : > "$d/status"
	{
		echo "deb [arch=amd64,arm64 signed-by=$key] http://deb.debian.org/debian $1 main"
		echo "deb [arch=amd64,arm64 signed-by=$key] http://deb.debian.org/debian $1-updates main"
		echo "deb [arch=amd64,arm64 signed-by=$key] http://deb.debian.org/debian-security $1-security main"
	} > "$d/sources.list"
	cat > "$d/apt.conf" <<APT
Dir::Etc::SourceList "$d/sources.list";
Dir::Etc::SourceParts "-";
Dir::Etc::Preferences "$d/preferences";
Dir::Etc::PreferencesParts "$d/preferences.d";
Dir::State "$d";
Dir::State::Lists "$d/lists";
Dir::State::status "$d/status";
Dir::Cache "$d/cache";
APT::Architecture "amd64";
APT::Architectures { "amd64"; "arm64"; };
Acquire::Languages "none";
#clear Acquire::IndexTargets::deb::DEP-11;
#clear Acquire::IndexTargets::deb::DEP-11-icons-small;
#clear Acquire::IndexTargets::deb::DEP-11-icons;
#clear Acquire::IndexTargets::deb::DEP-11-icons-hidpi;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
APT
	chown -R _apt "$d/lists/partial" "$d/cache/archives/partial" 2>/dev/null || true
	echo "== apt-get update ($1: private lists in $d)" >&2
	if ! APT_CONFIG=$d/apt.conf timeout 600 apt-get update -q >"$d/update.log" 2>&1; then
		ls "$d/lists/"*_Packages* >/dev/null 2>&1 || { cat "$d/update.log" >&2; die "apt-get update for $1 failed and there are no lists"; }
		echo "== apt-get update ($1) failed, using the lists there: $(tail -n1 "$d/update.log")" >&2
	fi
	apt_updated[$1]=1
}

# fetch SUITE PACKAGE[:ARCH]: prints the cached .deb, downloading it only when that version is not there.
fetch() {
	local conf=$cache/apt/$1/apt.conf name=${2%%:*} arch= ver deb
	[ "$2" = "$name" ] || arch=${2#*:}
	ver=$(APT_CONFIG=$conf apt-cache policy "$2" | awk '/Candidate:/{print $2}')
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || die "no candidate for $2 in $1's lists"
	arch=${arch:-$(APT_CONFIG=$conf apt-cache show "$2=$ver" | awk '/^Architecture:/{print $2; exit}')}
	deb="$cache/${name}_${ver//:/%3a}_${arch}.deb"
	if [ ! -s "$deb" ]; then
		echo "== download $2 $ver ($1)" >&2
		mkdir -p "$cache/dl" && { chown _apt "$cache/dl" 2>/dev/null || true; }
		(cd "$cache/dl" && APT_CONFIG=$conf timeout 600 apt-get download -q "$2=$ver" >/dev/null) || die "apt-get download $2=$ver failed"
		mv "$cache/dl/${name}_"*"_${arch}.deb" "$deb"
		rmdir "$cache/dl" 2>/dev/null || true
	fi
	echo "$deb"
}

# kernel ENTRY: sets kpkg, kver, kroot (the unpacked package, its modules uncompressed, as busybox
# loads only plain .ko, with modules.dep from depmod) for the entry's release and architecture.
kernel() {
	local suite=${E_SUITE[$1]} arch=${1##*-} deb
	aptconf "$suite"
	kpkg=$(APT_CONFIG=$cache/apt/$suite/apt.conf apt-cache search --names-only "^linux-image-${E_KVER[$suite]}-$arch-unsigned\$" |
		cut -d' ' -f1 | sort -V | tail -n1)
	[ -n "$kpkg" ] || die "no linux-image-${E_KVER[$suite]}-$arch-unsigned in $suite's lists"
	kver=${kpkg#linux-image-}; kver=${kver%-unsigned}
	deb=$(fetch "$suite" "$kpkg:$arch")
	kroot=${deb%.deb}
	if [ ! -f "$kroot/.unpacked" ]; then
		rm -rf "$kroot"
		dpkg -x "$deb" "$kroot"
		# Debian 13 is merged-/usr (usr/lib/modules): the same paths as the others, as on such a system
		[ -e "$kroot/lib" ] || [ ! -d "$kroot/usr/lib/modules" ] || ln -s usr/lib "$kroot/lib"
		find "$kroot/lib/modules/$kver/" -name '*.ko.xz' -exec xz -d {} +
		depmod -b "$kroot" "$kver"   # the package has no modules.dep: depmod makes it at install
		touch "$kroot/.unpacked"
	fi
	[ -f "$kroot/boot/vmlinuz-$kver" ] || die "no boot/vmlinuz-$kver in $kpkg"
	[ -f "$kroot/lib/modules/$kver/modules.dep" ] || die "depmod made no modules.dep for $kver"
	echo "== kernel $kpkg ($(basename "$deb"), unpacked in $kroot)"
}

# ---- binaries, built on the host for each architecture the matrix needs
# tests.txt: PACKAGE TEST WHERE [WHY]; WHERE is a comma-separated list of the tags of E_TAGS: all
# (every entry whose kernel eaddr loads on), amd64 (the host and the amd64 guests), host, old (the
# kernels too old for eaddr), ipvs (the amd64 guests: their kernels ship ip_vs, the host's has none).
tests=${KERNELS_TESTS:-testdata/kernels/tests.txt}
[ -f "$tests" ] || die "no test list $tests"
# selpkgs TAGS: the packages with a test whose WHERE shares a tag with TAGS (comma-separated)
selpkgs() {
	awk -v tags="$1" 'BEGIN { n = split(tags, t, ","); for (i = 1; i <= n; i++) want[t[i]] = 1 }
		!/^#/ && NF { m = split($3, w, ","); for (i = 1; i <= m; i++) if (w[i] in want) { print $1; next } }' "$tests" | sort -u
}
pkgs=$(awk '!/^#/ && NF {print $1}' "$tests" | sort -u)
build() { # ARCH: eaddr, bindfail and, in one go command (it compiles them side by side), the test
	# binaries of the packages this run's entries of ARCH select tests from
	local d=$work/$1 p bp=() sel
	sel=$(selpkgs "${arch_tags[$1]}")
	echo "== build for $1: eaddr, bindfail, go test -c of ${sel//$'\n'/ }"
	mkdir -p "$d/tests"
	GOARCH=$1 CGO_ENABLED=0 go build -trimpath -o "$d/eaddr" ./cmd/eaddr
	GOARCH=$1 CGO_ENABLED=0 go build -trimpath -o "$d/bindfail" ./testdata/kernels/bindfail
	for p in $sel; do bp+=("./$p"); done
	if [ ${#bp[@]} -gt 0 ]; then
		# go test -c -o DIR/ names each binary after its package's last element; they differ here
		GOARCH=$1 CGO_ENABLED=0 go test -c -o "$d/tests/" "${bp[@]}"
		for p in $sel; do
			[ "${p##*/}.test" = "${p//\//_}.test" ] || mv "$d/tests/${p##*/}.test" "$d/tests/${p//\//_}.test"
		done
	fi
}
# gotests TAGS FILE: the lines `PKGDIR TESTBIN REGEX` for guest-init.sh: the tests whose WHERE
# shares a tag with TAGS (comma-separated).
gotests() {
	local p sel
	: > "$2"
	for p in $pkgs; do
		sel=$(awk -v p="$p" -v tags="$1" 'BEGIN { n = split(tags, t, ","); for (i = 1; i <= n; i++) want[t[i]] = 1 }
			!/^#/ && $1 == p { m = split($3, w, ","); for (i = 1; i <= m; i++) if (w[i] in want) { print $2; next } }' "$tests" | paste -sd'|')
		[ -z "$sel" ] || echo "$p ${p//\//_}.test ^($sel)\$" >> "$2"
	done
}
# every kernel package (and busybox-static:arm64) first: a failed download stops the run before
# anything is built or booted
declare -A K_PKG=() K_VER=() K_ROOT=() BB_DEB=()
for e in "${entries[@]}"; do
	case $e in host | host-scenario) continue ;; esac
	kernel "$e"
	K_PKG[$e]=$kpkg K_VER[$e]=$kver K_ROOT[$e]=$kroot
	[ "${e##*-}" != arm64 ] || BB_DEB[$e]=$(fetch "${E_SUITE[$e]}" busybox-static:arm64)
done
echo "== kernels fetched in $(secs "$start") s"
[ -z "${KERNELS_FETCHED:-}" ] || : >"$KERNELS_FETCHED"
# the guests run a copy: an edit of the checkout during a run does not reach a running guest
cp testdata/kernels/guest-init.sh "$work/guest-init.sh"
schemacheck=$work/schemacheck
CGO_ENABLED=0 go build -o "$schemacheck" ./testdata/kernels/schemacheck
[ -z "$want_amd64" ] || build amd64
[ -z "$want_arm64" ] || build arm64
echo "== built in $(secs "$start") s"

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
	local d=${3%/*}/initramfs m
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/mods" "$d/proc" "$d/sys" "$d/dev" "$d/newroot" "$d/host" "$d/etc" "$d/lib/modules" "$d/tmp" "$d/run"
	cp "$1" "$d/bin/busybox"
	# ?: only some kernels have it (virtio_pci_*_dev since 5.14, netfs since 5.13, fscache until
	# 6.7, then part of netfs); modorder checks that no module needs one that is not there
	for m in drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko \
		?drivers/virtio/virtio_pci_modern_dev.ko ?drivers/virtio/virtio_pci_legacy_dev.ko \
		drivers/virtio/virtio_pci.ko ?fs/netfs/netfs.ko ?fs/fscache/fscache.ko \
		net/9p/9pnet.ko net/9p/9pnet_virtio.ko fs/9p/9p.ko; do
		if [ -f "$2/${m#\?}" ]; then
			cp "$2/${m#\?}" "$d/mods/"
		elif ! grep -qx "kernel/${m#\?}" "$2/../modules.builtin"; then   # built in: virtio on arm64
			[ "$m" != "${m#\?}" ] || die "no module $m in the kernel package, nor built in"
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

# judge MODE ENTRY LOG RC KVER ARCH PARAMS...: check.py on one entry's output; its summary (the
# `kernel ...` line and the failed checks) goes to $work/ENTRY.result for the run's last lines
judge() {
	local mode=$1 e=$2; shift 2
	local out rc=0
	out=$(python3 testdata/kernels/check.py --schemacheck "$schemacheck" --schema docs/event.schema.json \
		--tests "$tests" --mode "$mode" --tags "${E_TAGS[$e]}" --lacks "${E_LACKS[$e]:-}" "$@") || rc=$?
	echo "$out"
	echo "$out" | sed -n '/^kernel .*passed.*failed$/,$p' > "$work/$e.result"
	return "$rc"
}

# ---- host: the machine's kernel, no VM (host-scenario: the scenario only, no Go test)
run_host() { # ENTRY
	local e=$1 t0 d=$work/$1 rc=0 pod1 cid1 pod2 cid2 cgbase params what=", then the Go kernel tests"
	t0=$(date +%s)
	[ "$e" = host ] || what=" only; no Go test: make test runs them on this kernel"
	# the Go tests keep TMPDIR (/tmp): e2e/kernel's C clients are found again by argv[0] after they
	# exit, and eaddr keeps 64 bytes of it (EADDR_ARGS_MAX): a longer TMPDIR cuts their path
	mkdir -p "$d"
	pod1=$(uuid) cid1=$(hex64) pod2=$(uuid) cid2=$(hex64) cgbase=eaddr-k$(uuid | cut -c1-8)
	gotests "${E_TAGS[$e]}" "$d/gotests"
	params="mode=host kdir=$work/amd64 edir=$d repo=$repo cgbase=$cgbase pod1=$pod1 cid1=$cid1 pod2=$pod2 cid2=$cid2"
	echo "== $e: kernel $(uname -r) $(uname -m), no VM: the scenario in its own mount/net/UTS namespaces$what"
	# the scenario mounts its own proc, sysfs, cgroup2, tracefs, tmpfs on /run: private mounts
	KERNELS_PARAMS="$params" KERNELS_PHASE=scenario timeout "$t_amd64" \
		unshare --mount --net --uts --propagation private /bin/sh "$work/guest-init.sh" >"$d/console.log" 2>&1 || rc=$?
	[ "$rc" = 0 ] || echo "==== scenario exited $rc" >>"$d/console.log"
	KERNELS_PARAMS="$params" KERNELS_PHASE=gotests timeout "$t_amd64" \
		/bin/sh "$work/guest-init.sh" >>"$d/console.log" 2>&1 || rc=$?
	cat "$d/console.log"
	echo "== $e: $(secs "$t0") s"
	judge host "$e" "$d/console.log" "$rc" "$(uname -r)" "$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')" "$cgbase" "$pod1" "$cid1" "$pod2" "$cid2"
}

# ---- a Debian kernel under qemu
run_vm() { # ENTRY
	local e=$1 arch=${1##*-} t0 d=$work/vm-$1 rc=0 pod1 cid1 pod2 cid2 cgbase timeout bb append qemu
	local kver=${K_VER[$e]} kroot=${K_ROOT[$e]}
	t0=$(date +%s)
	echo "== $e: kernel ${K_PKG[$e]} (unpacked in $kroot)"
	mkdir -p "$d"
	gotests "${E_TAGS[$e]}" "$d/gotests"
	# the kernel runs this when it wants a module (request_module): inet_diag, tcp_diag, ...
	if [ "$arch" = amd64 ]; then
		bb=/bin/busybox
		printf '#!/bin/sh\nexec /usr/sbin/modprobe -d %s "$@"\n' "$kroot" > "$d/modprobe"
	else
		rm -rf "$d/bb" && dpkg -x "${BB_DEB[$e]}" "$d/bb"
		bb=$d/bb/bin/busybox
		[ -f "$bb" ] || bb=$d/bb/usr/bin/busybox   # Debian 13: merged /usr
		printf '#!/bin/busybox sh\nexec /bin/busybox modprobe "$@"\n' > "$d/modprobe"
	fi
	chmod 755 "$d/modprobe"
	mkinitramfs "$bb" "$kroot/lib/modules/$kver/kernel" "$d/initramfs.cpio.gz"
	pod1=$(uuid) cid1=$(hex64) pod2=$(uuid) cid2=$(hex64) cgbase=eaddr-k$(uuid | cut -c1-8)
	append="panic=-1 quiet loglevel=4 guest_init=$work/guest-init.sh mode=vm kdir=$work/$arch edir=$d repo=$repo cgbase=$cgbase pod1=$pod1 cid1=$cid1 pod2=$pod2 cid2=$cid2"
	[ -z "${E_LACKS[$e]:-}" ] || append="$append lacks=${E_LACKS[$e]}"
	if [ "$arch" = amd64 ]; then
		timeout=$t_amd64
		# thread=single (one host thread runs both vCPUs in turn): with qemu's (7.2) multi-threaded
		# TCG, 3 of 5 boots of 6.12 on 2026-12-01 died of "Oops: int3" in
		# syscall_exit_to_user_mode_prepare, a breakpoint of the kernel's code patching (a static
		# call or key switched as tracepoints attach) met after the patch was done; 0 of 10 with one
		# thread. 6.1 met the same Oops once, in CI on 2026-12-04, after many clean runs.
		qemu=(qemu-system-x86_64 -accel tcg,thread=single -cpu max -smp 2 -m 2048)
		append="console=ttyS0 switch_root=1 $append"
	else
		timeout=$t_arm64
		# neoverse-n1: the core of Graviton2 and Ampere Altra. thread=single: one host thread runs
		# both vCPUs in turn. With qemu's multi-threaded TCG, 9 of 23 boots of 6.1 on 2026-12-01
		# missed every syscall of one process for a while (an event that never came), and 0 of 10
		# with thread=single; the amd64 guest never. docs/testing.md "Other kernels" says what is known.
		qemu=(qemu-system-aarch64 -accel tcg,thread=single -M virt -cpu neoverse-n1 -smp 2 -m 2048)
		append="console=ttyAMA0 binds=/etc:$repo:$work modules=$kroot/lib/modules $append"
	fi
	echo "== $e: boot $kver ($arch) under qemu (TCG, -nic none, at most $timeout s)"
	: > "$d/console.log"   # there before tail opens it: qemu's redirection runs in the background
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
	echo "== $e: qemu ($arch) exited $rc after $(secs "$t0") s"
	judge vm "$e" "$d/console.log" "$rc" "$kver" "$arch" "$cgbase" "$pod1" "$cid1" "$pod2" "$cid2"
}

# run_entry ENTRY: one entry, in a subshell of its own (started with &): its EXIT trap stops its
# qemu and console tail, as TERM from cleanup above makes it exit
run_entry() {
	trap 'set +e; [ -z "$qpid" ] || kill "$qpid" 2>/dev/null; [ -z "$tpid" ] || kill "$tpid" 2>/dev/null; [ -z "$qpid" ] || wait "$qpid" 2>/dev/null' EXIT
	trap 'exit 143' TERM
	case $1 in
	host | host-scenario) run_host "$1" ;;
	*) run_vm "$1" ;;
	esac
}
start_entry() { # ENTRY
	if [ "$jobs" = 1 ]; then
		run_entry "$1" &
	else
		echo "== $1: started at $(secs "$start") s; its output follows when it ends"
		run_entry "$1" >"$work/$1.log" 2>&1 &
	fi
	running[$!]=$1
}
reap() { # waits for one running entry and records its result; a wait, so INT/TERM act at once
	local pid='' rc=0 e
	wait -n -p pid "${!running[@]}" || rc=$?
	[ -n "$pid" ] || die "wait -n returned $rc and no entry"
	e=${running[$pid]}
	unset "running[$pid]"
	[ "$jobs" = 1 ] || { cat "$work/$e.log"; echo "== $e: ended at $(secs "$start") s, status $rc"; }
	if [ -s "$work/$e.result" ]; then
		results+=("$(cat "$work/$e.result")")
	else
		results+=("kernel entry $e: FAILED, it stopped (status $rc) before check.py judged it; its output is above")
	fi
	[ "$rc" = 0 ] || failed=1
}
[ "$jobs" = 1 ] || echo "== ${#entries[@]} entries, $jobs at a time"
for e in "${entries[@]}"; do
	while [ ${#running[@]} -ge "$jobs" ]; do reap; done
	start_entry "$e"
done
while [ ${#running[@]} -gt 0 ]; do reap; done

echo
echo "== make kernels: ${#entries[@]} kernels in $(secs "$start") s"
printf '%s\n' "${results[@]}"
exit "$failed"
