#!/usr/bin/env bash
# The container image (the Dockerfile's twin), built without a Docker engine or a registry:
# the static binary from the host's Go, then Debian's buildah (as root; package buildah) in a
# private vfs store under a temporary directory, with a generated signature policy, an empty
# registries.conf and a containers.conf of its own, so nothing in /etc/containers is needed,
# read or written. Everything is removed afterwards, even on failure, including the blob-info
# cache buildah always writes under /var/lib/containers/cache (when it was not there before).
# Output: IMAGE_ARCHIVE, an OCI archive of IMAGE_NAME:VERSION (`ctr images import`,
# `skopeo copy oci-archive:...`, `podman load`). Files and the config are dated IMAGE_EPOCH (the
# last commit), so the same tree gives the same image digest.
#
# `make image` runs it with these set; run by hand from the repository root.
set -euo pipefail

: "${GO:=go}" "${BUILDAH:=buildah}" "${LDFLAGS:=-s -w}" "${VERSION:=dev}"
: "${IMAGE_NAME:=localhost/eaddr}" "${IMAGE_ARCHIVE:=bin/eaddr-image.tar}"
: "${IMAGE_EPOCH:=0}" "${IMAGE_REVISION:=unknown}"

work=$(mktemp -d "${TMPDIR:-/tmp}/eaddr-image-XXXXXX")
wc= done=
store=(--root "$work/root" --runroot "$work/runroot" --storage-driver vfs)
b() {
	echo "+ $BUILDAH ${store[*]} $*" >&2
	TMPDIR="$work/tmp" CONTAINERS_CONF="$work/containers.conf" CONTAINERS_REGISTRIES_CONF="$work/registries.conf" \
		"$BUILDAH" "${store[@]}" "$@"
}

bic=/var/lib/containers/cache/blob-info-cache-v1.boltdb
had=
for p in /var/lib/containers /var/lib/containers/cache "$bic"; do
	if [ -e "$p" ]; then had="$had $p"; fi
done
cleanup() {
	if [ -n "$wc" ]; then b rm "$wc" >/dev/null 2>&1 || true; fi
	rm -rf "$work"
	if [ -z "$done" ]; then rm -f "$IMAGE_ARCHIVE"; fi
	for p in "$bic" /var/lib/containers/cache /var/lib/containers; do
		case " $had " in
		*" $p "*) ;;
		*) rm -f "$p" 2>/dev/null || rmdir "$p" 2>/dev/null || true ;;
		esac
	done
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

mkdir -p "$work/tmp" "$work/networks" "$(dirname "$IMAGE_ARCHIVE")"
printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$work/policy.json"
printf '[network]\nnetwork_config_dir = "%s"\n' "$work/networks" >"$work/containers.conf"
: >"$work/registries.conf"
begin=$(date +%s)

echo "+ CGO_ENABLED=0 $GO build -trimpath -ldflags '$LDFLAGS' -o $work/eaddr ./cmd/eaddr" >&2
CGO_ENABLED=0 "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$work/eaddr" ./cmd/eaddr
rm -f "$IMAGE_ARCHIVE"
wc=$(b from --signature-policy "$work/policy.json" --pull=false --quiet --name "eaddr-image-$$" scratch)
b copy --quiet --chmod 0755 "$wc" "$work/eaddr" /eaddr
b config --entrypoint '["/eaddr"]' --cmd trace --created-by 'make image: COPY eaddr /eaddr' \
	--label org.opencontainers.image.title=eaddr \
	--label org.opencontainers.image.version="$VERSION" \
	--label org.opencontainers.image.revision="$IMAGE_REVISION" \
	--label org.opencontainers.image.source=https://github.com/eaddr/eaddr \
	"$wc"
b commit --quiet --signature-policy "$work/policy.json" --format oci --disable-compression=false \
	--timestamp "$IMAGE_EPOCH" --identity-label=false \
	"$wc" "oci-archive:$IMAGE_ARCHIVE:$IMAGE_NAME:$VERSION" >/dev/null
b rm "$wc" >/dev/null
wc= done=1
echo "$IMAGE_ARCHIVE: $IMAGE_NAME:$VERSION, $(du -h "$IMAGE_ARCHIVE" | cut -f1) ($(stat -c %s "$IMAGE_ARCHIVE") bytes), built in $(($(date +%s) - begin))s"
