#!/usr/bin/env bash
# The Debian base image that the agent image's test builds deploy/Dockerfile on, made on this
# machine: no container registry is reachable here, Debian's package mirror is. debootstrap
# (variant minbase, like debian:bookworm-slim) builds a bookworm root file system straight into
# a buildah working container, which is committed as localhost/gkq-base:bookworm-minbase-<RECIPE> in a buildah store of
# the project's own (vfs driver, under $GKQ_CACHE/containers; no system storage configuration).
# A second run finds the image and returns at once.
#
#   tools/image-base.sh            build the base unless the store has it; prints its tag
#   tools/image-base.sh tag        print the tag only
#   tools/image-base.sh store      print the store's image directory: a test builds in a store of
#                                  its own that reads the base from there, read-only
#                                  (buildah --storage-driver vfs --storage-opt vfs.imagestore=DIR)
#
# Installs buildah, runc and debootstrap from Debian when missing. runc, not crun: on a machine
# whose cgroup v2 hierarchy holds a controller beside the v1 ones (this one's holds hugetlb),
# crun refuses to start containers and runc starts them. Bump RECIPE when what the base holds
# changes: the tag changes, so the next run builds a new one.
#
# Environment:
#   GKQ_CACHE          cache root (default $HOME/.cache/gkq)
#   GKQ_DEBIAN_MIRROR  the mirror debootstrap reads (default http://deb.debian.org/debian)
set -euo pipefail

SUITE=bookworm
RECIPE=1
CACHE="${GKQ_CACHE:-$HOME/.cache/gkq}"
STORE="$CACHE/containers"
TAG="localhost/gkq-base:$SUITE-minbase-$RECIPE"
MIRROR="${GKQ_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
STORE_OPTS=(--root "$STORE/storage" --runroot "$STORE/run" --storage-driver vfs)

log() { printf '[image-base %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

case "${1:-build}" in
tag)
	echo "$TAG"
	exit 0
	;;
store)
	echo "$STORE/storage"
	exit 0
	;;
build) ;;
*)
	echo "usage: $0 [build|tag|store]" >&2
	exit 2
	;;
esac

missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || { log "needs root to install ${missing[*]} (apt-get install ${missing[*]})"; exit 1; }
	log "installing Debian packages: ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
PATH="$PATH:/usr/sbin:/sbin"

mkdir -p "$STORE/storage" "$STORE/run"
have_base() { buildah "${STORE_OPTS[@]}" inspect --type image "$TAG" >/dev/null 2>&1; }
if have_base; then
	echo "$TAG"
	exit 0
fi
# One build at a time (two checkouts' test runs share the cache); the one that waited finds the
# image made.
exec 9>"$STORE/build.lock"
flock 9
if have_base; then
	echo "$TAG"
	exit 0
fi

start=$(date +%s)
log "building $TAG with debootstrap from $MIRROR (once; cached in $STORE)"
ctr=$(buildah "${STORE_OPTS[@]}" from --name "gkq-base-build-$$" scratch)
cleanup() { buildah "${STORE_OPTS[@]}" rm "$ctr" >/dev/null 2>&1 || true; }
trap cleanup EXIT
root=$(buildah "${STORE_OPTS[@]}" mount "$ctr")

debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$STORE/debootstrap.log" 2>&1 || {
	tail -n 30 "$STORE/debootstrap.log" >&2
	log "debootstrap failed (whole log: $STORE/debootstrap.log)"
	exit 1
}

# The package sources of Debian's own container images (debian:bookworm-slim): the release,
# its updates and security updates.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# What makes Debian's images slim, for what later installs: no translated package
# descriptions, no documentation, manual pages or locales (copyright files stay).
cat >"$root/etc/apt/apt.conf.d/docker-no-languages" <<'EOF'
Acquire::Languages "none";
EOF
cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
# Nothing of the build host's stays in the image: downloaded packages, package lists, logs.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/* \
	"$root"/debootstrap
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"

buildah "${STORE_OPTS[@]}" umount "$ctr" >/dev/null
buildah "${STORE_OPTS[@]}" config --cmd bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--label "dev.gkq.base=debootstrap --variant=minbase $SUITE" "$ctr"
buildah "${STORE_OPTS[@]}" commit --quiet "$ctr" "$TAG" >/dev/null
log "built $TAG in $(($(date +%s) - start))s"
echo "$TAG"
