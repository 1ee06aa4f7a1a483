#!/usr/bin/env bash
# A private Docker engine, a base image made from Debian's packages, and samzapy's image built on
# it: what `make docker-test` runs, on a machine that reaches the package registries but not
# Docker Hub (so `FROM python:3.12-slim` cannot be pulled).
#
#   scripts/docker.sh up        install Debian's docker.io if dockerd is missing; start a dockerd of
#                               our own (vfs storage, no bridge, no iptables) on its own socket
#   scripts/docker.sh base      import the local base image (a minimal Debian bookworm with its
#                               Python 3.11, its headers and pip, as the official python images
#                               have them, made with debootstrap), cached as a tarball
#   scripts/docker.sh build     build the project's Dockerfile on that base (--build-arg BASE_IMAGE)
#   scripts/docker.sh down      stop the dockerd that `up` started and remove its data
#   scripts/docker.sh env       print the DOCKER_HOST of that engine (eval "$(scripts/docker.sh env)")
#   scripts/docker.sh with CMD  up, base, build, run CMD with DOCKER_HOST and SAMZAPY_DOCKER_IMAGE
#                               set, then down (also when CMD fails); exits with CMD's status
#
# Environment (all optional):
#   SAMZAPY_DOCKER_DIR      the engine's pid, log and data (<repo>/.docker)
#   SAMZAPY_CACHE           the base image tarball goes to $SAMZAPY_CACHE/docker (~/.cache/samzapy)
#   SAMZAPY_DEBIAN_MIRROR   the Debian mirror debootstrap reads (http://deb.debian.org/debian)
#   SAMZAPY_DOCKER_IMAGE    the tag `build` gives the image (samzapy:test)
#
# Builds and containers use the host's network (`--network host`): the engine runs without a
# bridge, the image's `pip install` reaches the package index the way the host does, and a job in
# a container reaches a broker on the host's 127.0.0.1. A host that trusts extra CA certificates
# (/usr/local/share/ca-certificates, e.g. a TLS-inspecting proxy's) passes them on to the base
# image, as an official image on that host would need too.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${SAMZAPY_DOCKER_DIR:-$ROOT/.docker}"
[[ "$DIR" == /* ]] || DIR="$PWD/$DIR"
CACHE="${SAMZAPY_CACHE:-$HOME/.cache/samzapy}/docker"
MIRROR="${SAMZAPY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
IMAGE="${SAMZAPY_DOCKER_IMAGE:-samzapy:test}"
SUITE=bookworm
BASE_TAG="samzapy-base:$SUITE"
# Bump to rebuild the cached base after changing what goes into it.
BASE_RECIPE=3
BASE_TARBALL="$CACHE/$SUITE-python3-r$BASE_RECIPE.tar"
# The engine's sockets live under /run: a unix socket path must stay under 108 bytes, whatever
# the depth of the checkout.
RUN_DIR="/run/samzapy-docker-$(printf '%s' "$DIR" | md5sum | cut -c1-10)"
SOCKET="$RUN_DIR/docker.sock"
PID_FILE="$DIR/dockerd.pid"
LOG_FILE="$DIR/dockerd.log"
export DOCKER_HOST="unix://$SOCKET"

die() {
    echo "docker.sh: $*" >&2
    exit 1
}
say() { echo "docker.sh: $*"; }

need_root() {
    [[ "$(id -u)" == 0 ]] || die "$1 needs root (a rootless engine is not set up here)"
}

# Installs Debian packages $2... unless command $1 is there.
ensure() {
    local command="$1"
    shift
    command -v "$command" >/dev/null && return 0
    need_root "installing $*"
    say "installing $* from Debian's packages"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$DIR/apt.log" 2>&1; then
        apt-get update -q >>"$DIR/apt.log" 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>"$DIR/apt.log" 2>&1 ||
            { tail -n 20 "$DIR/apt.log" >&2; die "apt-get install $* failed (log: $DIR/apt.log)"; }
    fi
}

# --- the engine --------------------------------------------------------------------------------

engine_pid() {
    local pid
    [[ -f "$PID_FILE" ]] || return 1
    pid="$(cat "$PID_FILE")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q dockerd || return 1
    echo "$pid"
}

up() {
    mkdir -p "$DIR"
    if engine_pid >/dev/null && docker info >/dev/null 2>&1; then
        say "the engine of $DIR already runs ($DOCKER_HOST)"
        return 0
    fi
    need_root "starting dockerd"
    ensure dockerd docker.io
    mkdir -p "$RUN_DIR"
    say "starting dockerd (log: $LOG_FILE)"
    # setsid: the engine outlives this script; `down` (or `with`'s trap) stops it.
    setsid dockerd \
        --storage-driver=vfs --bridge=none --iptables=false \
        --data-root "$DIR/data" --exec-root "$RUN_DIR/exec" --pidfile "$PID_FILE" \
        --host "$DOCKER_HOST" >"$LOG_FILE" 2>&1 </dev/null &
    local waited=0
    until docker info >/dev/null 2>&1; do
        if ((waited >= 60)) || ! kill -0 $! 2>/dev/null; then
            tail -n 30 "$LOG_FILE" >&2
            die "dockerd did not answer on $DOCKER_HOST within 30 s"
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    say "engine $(docker version --format '{{.Server.Version}}') answers on $DOCKER_HOST"
}

down() {
    local pid waited=0
    if pid="$(engine_pid)"; then
        # Containers first, so none outlives its engine (their processes are children of
        # the engine's containerd shims).
        docker ps -q | xargs -r docker rm -f >/dev/null 2>&1 || true
        kill -TERM "$pid"
        while kill -0 "$pid" 2>/dev/null; do
            if ((waited >= 60)); then
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.5
            waited=$((waited + 1))
        done
        say "dockerd $pid stopped"
    fi
    rm -f "$PID_FILE"
    # Anything the engine left mounted under its directories, deepest first.
    if [[ -d "$DIR/data" || -d "$RUN_DIR" ]]; then
        awk -v a="$DIR/data" -v b="$RUN_DIR" '$2 ~ "^" a || $2 ~ "^" b {print $2}' /proc/mounts |
            sort -r | xargs -r -n1 umount -l 2>/dev/null || true
        rm -rf "$DIR/data" "$RUN_DIR"
    fi
}

# --- the base image ----------------------------------------------------------------------------

make_base_tarball() {
    need_root "debootstrap"
    ensure debootstrap debootstrap
    mkdir -p "$CACHE"
    local rootfs
    rootfs="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
    chmod 755 "$rootfs" # it becomes the image's /, which mktemp made private to root
    say "debootstrapping a minimal $SUITE with Python 3 and pip from $MIRROR (about a minute)"
    if ! debootstrap --variant=minbase --include=python3,python3-pip,libpython3-dev,ca-certificates \
        "$SUITE" "$rootfs" "$MIRROR" >"$DIR/debootstrap.log" 2>&1; then
        tail -n 20 "$DIR/debootstrap.log" >&2
        rm -rf "$rootfs"
        die "debootstrap failed (log: $DIR/debootstrap.log)"
    fi
    # Like the official python images: `python` on the PATH, and pip installs system-wide
    # (Debian marks its Python as externally managed; an image is the whole system).
    ln -sf python3 "$rootfs/usr/bin/python"
    rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc "$rootfs"/usr/share/man "$rootfs"/usr/share/locale
    tar --numeric-owner -C "$rootfs" -cf "$BASE_TARBALL.tmp.$$" .
    mv "$BASE_TARBALL.tmp.$$" "$BASE_TARBALL"
    rm -rf "$rootfs"
    say "cached the base image as $BASE_TARBALL ($(du -sh "$BASE_TARBALL" | cut -f1))"
}

base() {
    mkdir -p "$DIR"
    if docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
        return 0
    fi
    [[ -f "$BASE_TARBALL" ]] || make_base_tarball
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python3"]' \
        "$BASE_TARBALL" "$BASE_TAG" >/dev/null
    say "imported $BASE_TAG from $BASE_TARBALL"
}

build() {
    base
    say "building $IMAGE from $ROOT/Dockerfile on $BASE_TAG"
    docker build --network host --build-arg "BASE_IMAGE=$BASE_TAG" -t "$IMAGE" "$ROOT" \
        >"$DIR/build.log" 2>&1 || { tail -n 30 "$DIR/build.log" >&2; die "docker build failed (log: $DIR/build.log)"; }
    say "built $IMAGE"
}

with() {
    [[ $# -gt 0 ]] || die "usage: scripts/docker.sh with COMMAND [ARG...]"
    trap down EXIT
    up
    build
    local status=0
    SAMZAPY_DOCKER_IMAGE="$IMAGE" "$@" || status=$?
    return "$status"
}

case "${1:-}" in
up) up ;;
base) base ;;
build) build ;;
down) down ;;
env) echo "export DOCKER_HOST=$DOCKER_HOST" ;;
with)
    shift
    with "$@"
    ;;
*)
    sed -n '2,25p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
