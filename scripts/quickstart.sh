#!/bin/sh
# One command from a fresh Debian 12 machine to a mounted Cairn volume:
# installs the dependencies, builds and installs Cairn, starts cairnd on this
# host, creates and starts the volume "gv0" with one brick, and mounts it.
#   VOLUME, BRICK and MOUNT may be set in the environment to change the defaults.
set -e
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "quickstart: run as root (it installs packages and mounts)" >&2; exit 1; }
VOLUME=${VOLUME:-gv0}
BRICK=${BRICK:-/var/lib/cairn/bricks/$VOLUME}
MOUNT=${MOUNT:-/mnt/cairn}

scripts/deps.sh
make -s -j"$(nproc)"
make install >/dev/null
export PATH=/usr/local/sbin:$PATH

if ! cairn volume list >/dev/null 2>&1; then
    mkdir -p /var/lib/cairnd
    # A local volume: cairnd answers on loopback only. For a pool of
    # servers run cairnd without --listen (all addresses); see docs/cluster.md.
    cairnd --listen 127.0.0.1 --workdir /var/lib/cairnd
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        cairn volume list >/dev/null 2>&1 && break
        sleep 0.5
    done
fi
if ! cairn volume info "$VOLUME" >/dev/null 2>&1; then
    mkdir -p "$BRICK"
    # force: on a one-disk machine the brick sits on the root file system
    cairn volume create "$VOLUME" "127.0.0.1:$BRICK" force
fi
cairn volume info "$VOLUME" | grep -q "Status: Started" || cairn volume start "$VOLUME"
mkdir -p "$MOUNT"
mountpoint -q "$MOUNT" || mount -t cairn "127.0.0.1:/$VOLUME" "$MOUNT"
echo
cairn volume status "$VOLUME"
echo
echo "Cairn volume $VOLUME is mounted on $MOUNT."
