# syntax=docker/dockerfile:1
#
# eaddr's container image, for people with a Docker (BuildKit) engine:
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t eaddr .
#
# This file is NOT built by CI and cannot be built on the CI machine (no Docker engine, no
# registry to pull golang or push to). `make image` is what CI builds: the same binary (same
# go build flags) in the same scratch image (same ENTRYPOINT, CMD and labels), made with
# buildah into an OCI archive, bin/eaddr-image.tar; cmd/eaddr/image_test.go imports that archive
# into containerd and proves it traces the host. Keep the two in step.
#
# The image holds one file, the static binary: `eaddr trace` needs nothing else from its image
# (no libc, no /etc/passwd, no CA certificates). It needs from the node what the DaemonSet
# gives it: hostPID (to read /proc/PID of the traced processes and their netns; the node's own
# netns is found through pid 1, so hostNetwork is not needed), privileged (or the capabilities
# named in the DaemonSet manifest), and /sys/kernel/btf, /sys/fs/cgroup (read-only) and /sys/kernel/tracing from the
# host. By hand:
#
#   docker run --rm --privileged --pid host --network host \
#     -v /sys/kernel/btf:/sys/kernel/btf:ro -v /sys/fs/cgroup:/sys/fs/cgroup:ro \
#     -v /sys/kernel/tracing:/sys/kernel/tracing eaddr
#
# The BPF objects (tracer/*.o, amd64 and arm64) are committed, so the build needs only Go: no
# clang. --platform=linux/arm64 cross-compiles on the build platform.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG VERSION=dev
ARG REVISION=
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=$VERSION -X main.commit=$REVISION" -o /eaddr ./cmd/eaddr

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title=eaddr \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.source=https://github.com/eaddr/eaddr
COPY --from=build /eaddr /eaddr
ENTRYPOINT ["/eaddr"]
CMD ["trace"]
