#!/usr/bin/env bash
# The one list of what eaddr's tests need from Debian, installed as root: `sudo make deps` for people,
# and .ci/run calls it too, so the two cannot drift. A test whose program or package is missing skips
# and names its package (internal/testing/testenv); internal/testing/testenv's TestSkipPackagesAreListed checks that
# every package a skip names is listed here. `make test` ends with one line that counts the skips and
# points here. Building eaddr itself needs only Go.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "deps: run as root (sudo make deps): it installs Debian packages" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive

# Each group: why the tests need it. Keep one package per word; the test above reads these lines.
packages=(
	# make generate (pinned clang) and the BPF headers: bpf_helpers.h, bpf_tracing.h, bpf_core_read.h
	clang-19 llvm-19 libbpf-dev
	# the basics a minimal image may lack
	make git ca-certificates iproute2 util-linux kmod cpio
	# the strerror tables (go generate ./explain) and the C test clients, built against glibc and musl
	gcc musl-tools
	# glibc's translations of the strerror texts (explain's strerror_l10n.go, go generate ./explain)
	libc-l10n
	# the real clients of the integration tests and the demo
	curl wget busybox-static netcat-openbsd python3 socat
	# cmd/eaddr's terminal tests (the pane of tmux_test.go): eaddr top, check, trace and explain in a real terminal
	tmux
	# TestNodePortTimeout (cmd/eaddr/nodeport_timeout_test.go): a NodePort-like rule that takes SYN-ACKs
	nftables
	# TestWordingsRealPrograms (cmd/eaddr/wordings_test.go): the programs whose lines it checks
	openssh-client redis-tools postgresql-client php-cli php-curl ruby netcat-traditional
	libwww-perl python3-requests nodejs
	# the Kubernetes end-to-end and image tests: a private containerd (internal/testing/critest), runc, the
	# CNI plugins, buildah for make image. No system containerd is started.
	containerd runc containernetworking-plugins buildah
	# promtool checks and unit-tests the alert rules (e2e/apiserver/alerts_test.go); Debian has no
	# promtool-only package. Where systemd runs, the package also starts a Prometheus on :9090.
	prometheus
	# the API server tests run Debian's etcd 3.4 under a kube-apiserver built from the Go module
	# proxy. Where systemd runs, the package also starts an etcd on :2379, which nothing uses.
	etcd-server
	# make kernels: qemu for the guests (the host's static busybox, cpio and kmod above make their
	# initramfs), xz for Debian 13's compressed modules, the keyring its private apt setup checks
	# Debian's archive with
	qemu-system-x86 qemu-system-arm xz-utils debian-archive-keyring
	# diagnose/nodeport's tests write kube-proxy's NodePort rules with the real tools (eaddr reads
	# them over netlink and needs none): nft, iptables-nft and iptables-legacy, ipvsadm
	nftables iptables ipvsadm
)

# Another apt (unattended-upgrades on a fresh machine, a second install) may hold the
# lock: wait for it instead of failing the first run.
lock=(-o DPkg::Lock::Timeout=600)
apt-get "${lock[@]}" update -qq
# (make kernels fetches its kernels and busybox-static:arm64 through apt setups of its own, in its
# cache: the host needs no arm64 architecture and no other Debian release in its sources.)
apt-get "${lock[@]}" install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "deps: installed ${#packages[@]} packages"
