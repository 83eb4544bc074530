# eaddr. `make` builds; `sudo make run` traces this host; `make test` runs every test
# (kernel tests need root: under sudo, or with EADDR_REQUIRE_BPF=1 a skip is a failure).

GO      ?= go
CLANG   ?= clang-19
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
BIN     := bin/eaddr
# eaddr version prints both: the toolchain's own VCS stamp is off where GOFLAGS has -buildvcs=false.
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run demo deps test test-race generate check-generated vet clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/eaddr

# Build and trace this host; JSON lines on stdout, logs on stderr. Needs root.
run: build
	./$(BIN) trace

# Reproduce port exhaustion in a throwaway netns and watch eaddr catch it. Needs root.
demo: build
	./$(BIN) demo

# Install, as root, every Debian package the tests need: the one list (.ci/deps.sh) that CI
# installs too. `sudo make deps test` then runs every test with nothing skipped for a missing
# program.
deps:
	bash .ci/deps.sh

# The README's test command. Run as root so the kernel tests run too. No test asserts a latency
# or hopes for a speed (docs/testing.md), so the result does not depend on what runs beside it.
# One package at a time (-p 1) all the same: some tests trace every process on the node and
# count what reaches their ring (the soak's lossless ring is sized for its own churn and as much
# again from the rest of the node), and another package's storms would share it; and the
# packages that start a kube-apiserver with etcd, or containerd, gain nothing from running at
# once on 2 CPUs.
# Printed as a plain go test prints, then the ten slowest tests, every skipped test with its reason and one summary
# line: how many skipped, why, and what installs the packages they need (internal/testing/testenv/cmd/gotest).
# CGO_ENABLED=0: the eaddr that the end-to-end tests run, and the test binaries, are built as
# every shipped eaddr is (make build, the image, the Dockerfile), and as make kernels builds them,
# so the kernel tests on this kernel are the host entry's and share its Go build cache. That eaddr
# is built once, here, and given to each test binary's TestMain (eaddrtest.Main) as EADDR_TEST_BIN.
test:
	$(GO) vet ./...
	$(GO) build -o bin/gotest ./internal/testing/testenv/cmd/gotest
	CGO_ENABLED=0 $(GO) build -o bin/eaddr-test ./cmd/eaddr
	CGO_ENABLED=0 GO='$(GO)' EADDR_TEST_BIN='$(CURDIR)/bin/eaddr-test' ./bin/gotest -p 1 -count=1 -timeout 20m ./...

# One end-to-end tier alone (docs/testing.md "The test tree"); `make test` runs them with the rest.
# As root, like make test.
.PHONY: test-kernel test-containerd test-apiserver test-cluster test-logagent
test-kernel:
	$(GO) test -count=1 -timeout 20m ./e2e/kernel

test-containerd:
	$(GO) test -count=1 -timeout 20m ./e2e/containerd

test-apiserver:
	$(GO) test -count=1 -timeout 20m ./e2e/apiserver

test-cluster:
	$(GO) test -count=1 -timeout 30m ./e2e/cluster

test-logagent:
	$(GO) test -count=1 -timeout 20m ./e2e/logagent

# The tests that need no root, under the race detector, as an unprivileged user (uid
# RACE_UID; root drops to it with setpriv, anyone else runs as themselves). The tracked tree is
# copied to a world-readable temporary directory and the test binaries are built there, so the
# checkout's own permissions (e.g. under /root) do not matter, with the modules vendored into
# it (the go command the tests run then needs no module cache). Tests that need root skip here:
# EADDR_REQUIRE_BPF is unset for this tier; `make test` as root runs them (docs/testing.md).
# The eaddr binary the end-to-end tests run is built once, not with -race, by the caller, and
# given to them as EADDR_TEST_BIN (eaddrtest.Main copies it instead of building its own: as
# uid 65534 that was a build from an empty cache in each package, 70 s of cmd/eaddr's 75).
# As root the copy is always RACE_ROOT_WORK (one run at a time, an flock), and uid 65534's Go
# build cache RACE_CACHE stays between runs: Go's build cache keys a package built without
# -trimpath by its directory, so a new temporary directory compiled every package and every
# vendored module again with -race at each run (docs/testing.md "CI"). RACE_JOBS packages at a
# time are built and run, each one's output printed whole when it ends.
RACE_PKGS ?= ./...
RACE_UID  ?= 65534
RACE_JOBS ?= 2
RACE_ROOT_WORK ?= /var/cache/eaddr-race/tree
RACE_CACHE ?= /var/cache/eaddr-race/cache-$(RACE_UID)
test-race:
	@set -eu; \
	if [ "$$(id -u)" = 0 ]; then \
		work='$(RACE_ROOT_WORK)'; mkdir -p "$$(dirname "$$work")"; exec 9>"$$work.lock"; flock 9; \
		rm -rf "$$work"; mkdir -m 700 "$$work"; \
		cache='$(RACE_CACHE)'; mkdir -p "$$cache"; chown -R $(RACE_UID):$(RACE_UID) "$$cache"; \
	else work=$$(mktemp -d "$${TMPDIR:-/tmp}/eaddr-race-XXXXXX"); cache=$$($(GO) env GOCACHE); fi; \
	trap 'rm -rf "$$work"' EXIT; \
	git ls-files -z | tar -c --null -T - -f - | tar -x -C "$$work"; \
	(cd "$$work" && $(GO) mod vendor); \
	chmod -R a+rX "$$work"; \
	mkdir "$$work/.home"; uid=$$(id -u); drop=; \
	if [ "$$uid" = 0 ]; then uid=$(RACE_UID); chown $(RACE_UID):$(RACE_UID) "$$work/.home"; \
		drop="setpriv --reuid=$(RACE_UID) --regid=$(RACE_UID) --clear-groups"; fi; \
	cd "$$work"; \
	$(GO) build -o .eaddr ./cmd/eaddr; chmod a+rx .eaddr; \
	pkgs=$$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' $(RACE_PKGS)); \
	if [ -z "$$pkgs" ]; then echo "test-race: no package with tests in $(RACE_PKGS)" >&2; exit 1; fi; \
	export drop uid work cache PATH="$$(dirname "$$(command -v $(GO))"):$$PATH"; \
	printf '%s\n' $$pkgs | xargs -P '$(RACE_JOBS)' -I{} sh -c ' \
		p=$$1; rc=0; \
		$(GO) test -race -c -o "$$p/race.test" "$$p" >"$$p/race.out" 2>&1 && chmod a+rx "$$p/race.test" && \
		(cd "$$p" && $$drop env -u EADDR_REQUIRE_BPF HOME="$$work/.home" GOCACHE="$$cache" \
			GOMODCACHE="$$work/.home/mod" GOPROXY=off GOTOOLCHAIN=local EADDR_TEST_BIN="$$work/.eaddr" \
			./race.test -test.count=1 -test.timeout=10m) >>"$$p/race.out" 2>&1 || rc=$$?; \
		{ echo "== go test -race $${p#$$work/} (uid $$uid)$$([ $$rc = 0 ] || echo ", FAILED with status $$rc")"; \
			cat "$$p/race.out"; } | flock "$$work" cat; \
		exit $$rc' sh {}

# Rebuild the committed BPF objects and Go bindings (amd64 and arm64) with the pinned clang.
generate:
	PATH="$$PATH" $(GO) generate ./tracer

# Fail when the committed objects differ from what `make generate` builds.
check-generated: generate
	git diff --exit-code -- tracer/ || { echo 'tracer/: committed BPF objects differ from make generate; commit the regenerated files' >&2; exit 1; }

# The helm that e2e/apiserver/helm_test.go runs (internal/testing/helmtest's Version, a v3 release), built from the
# Go module proxy with go install into make kube's cache (below) unless it is there, its log beside
# it. The tests build it on first use; this does it up front. Its own lock: it builds while `make
# kube` does. Cold about 7 minutes on 2 busy cores, then nothing.
.PHONY: helm
helm:
	$(GO) run ./internal/testing/cmd/build-tool helm

# The Kubernetes binaries the API server and cluster tests run (internal/testing/kubetest's Commands:
# kube-apiserver for internal/testing/kubetest, e2e/apiserver; kubectl for e2e/apiserver's kustomize,
# dry-run and debug tests and kubectl describe; kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy for internal/testing/kubecluster), built from the Go module proxy
# into /var/cache/eaddr-kube unless they are there: kube-apiserver about 8 minutes on 2 cores once,
# kubectl about 2 more, the other four about 3.5 more, then nothing. The tests build what they need on first use; this does it up
# front. `make kube-apiserver` builds only that one.
.PHONY: kube kube-apiserver
kube:
	$(GO) run ./internal/testing/cmd/build-tool kube

kube-apiserver:
	$(GO) run ./internal/testing/cmd/build-tool kube kube-apiserver

# A single-node Kubernetes cluster on this machine, for people (internal/testing/kubecluster: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, a private containerd with a CNI bridge,
# kubelet, kube-proxy, all 1.34.2 from `make kube`'s cache). `make cluster-up` starts it, prints
# the kubeconfig and how to use the real kubectl with it, and runs until Ctrl-C; `make
# cluster-down`, from any shell, stops it and puts back what it changed on the host, recorded in
# CLUSTER_STATE (also after a killed cluster-up). Needs root and `make deps`.
CLUSTER_STATE ?= /run/eaddr-kubecluster.json
.PHONY: cluster-up cluster-down
cluster-up:
	CGO_ENABLED=0 $(GO) build -o bin/kubecluster ./internal/testing/kubecluster/cmd/kubecluster
	./bin/kubecluster up -state $(CLUSTER_STATE)

cluster-down:
	CGO_ENABLED=0 $(GO) build -o bin/kubecluster ./internal/testing/kubecluster/cmd/kubecluster
	./bin/kubecluster down -state $(CLUSTER_STATE)

# The OpenTelemetry Collector the log agent tests run (internal/testing/otelcol: file_log receiver, file
# and debug exporters, as ocb would build them), built from the Go module proxy into
# /var/cache/eaddr-otelcol unless it is there: about 3 minutes on 2 cores cold, then nothing.
.PHONY: otelcol
otelcol:
	$(GO) run ./internal/testing/cmd/build-tool otelcol

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

clean:
	rm -rf bin

# Benchmarks, not timed tests (docs/performance.md): eaddr next to no tracer, an empty BPF
# program on the same tracepoints and bench/eaddr.bt under bpftrace, alternating, medians.
# Then the Go benchmarks, among them the port sampler on 100 netns x 500 sockets and 250 x 200
# (the node walk beside the per-netns reads: about 10 minutes more).
# Needs root. Flags: BENCH_FLAGS='-rounds 3 -micro 200ms' (./bin/eaddr-bench -h).
# BENCH_BASE=37cdb5e: the per-event section also measures bin/eaddr of that revision beside it.
BENCH_BASE ?=
.PHONY: bench
bench: build
	CGO_ENABLED=0 $(GO) build -o bin/eaddr-bench ./bench/cmd/eaddr-bench
	./bin/eaddr-bench -eaddr $(BIN) -go '$(GO)' $(if $(BENCH_BASE),-base '$(BENCH_BASE)') $(BENCH_FLAGS)

# The container image (the Dockerfile's twin) as an OCI archive, built with buildah and no
# Docker engine or registry: deploy/build-image.sh says how, and cleans up after itself.
BUILDAH       ?= buildah
IMAGE_NAME    ?= localhost/eaddr
IMAGE_ARCHIVE ?= bin/eaddr-image.tar
IMAGE_EPOCH   ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)

.PHONY: image
image:
	GO='$(GO)' BUILDAH='$(BUILDAH)' LDFLAGS='$(LDFLAGS)' VERSION='$(VERSION)' IMAGE_NAME='$(IMAGE_NAME)' \
	IMAGE_ARCHIVE='$(IMAGE_ARCHIVE)' IMAGE_EPOCH='$(IMAGE_EPOCH)' IMAGE_REVISION='$(IMAGE_REVISION)' \
		./deploy/build-image.sh

# Other kernels (docs/testing.md "Other kernels"): the kernel matrix. One line per kernel,
# `kernel <release> <arch>: N passed, M failed`, and a non-zero exit on any failure:
#   host            this machine's kernel, no VM
#   host-scenario   the host entry's scenario without its Go tests (make test's own): CI's; not in
#                   the default list
#   debian12-amd64  Debian 12's newest Linux 6.1 amd64 package, qemu-system-x86_64 (TCG)
#   debian12-arm64  Debian 12's newest Linux 6.1 arm64 package, qemu-system-aarch64 (TCG), GOARCH=arm64
#   debian13-amd64  Debian 13's newest Linux 6.12 amd64 package, as debian12-amd64
#   debian13-arm64  Debian 13's newest Linux 6.12 arm64 package, as debian12-arm64
#   debian11-amd64  Debian 11's newest Linux 5.10 amd64 package: too old for eaddr, which must
#                   refuse in one line naming bpf_get_current_task_btf; the probe's tests run
# Each runs the scenario of testdata/kernels/guest-init.sh and the Go kernel tests that
# testdata/kernels/tests.txt selects, built here. Needs root, qemu-system-x86, qemu-system-arm,
# busybox-static, cpio, kmod, xz-utils, python3 (sudo make deps) and Debian's archive: the packages
# come through a private apt setup per release in KERNELS_CACHE (/var/cache/eaddr-kernels), which
# also keeps them; the host's apt sources are not used. KERNELS='host debian13-arm64' picks
# entries. KERNELS_JOBS VMs at a time (default 1; each is one host thread), each bounded by a
# timeout (KERNELS_TIMEOUT_AMD64, KERNELS_TIMEOUT_ARM64, seconds). Figures: docs/testing.md.
KERNELS ?= host debian12-amd64 debian12-arm64 debian13-amd64 debian13-arm64 debian11-amd64
KERNELS_JOBS ?= 1
.PHONY: kernels test-kernels
kernels:
	KERNELS='$(KERNELS)' KERNELS_JOBS='$(KERNELS_JOBS)' ./testdata/kernels/run.sh

# The old name of the Debian 6.1 amd64 check, now one entry of the matrix.
test-kernels:
	KERNELS=debian12-amd64 ./testdata/kernels/run.sh
