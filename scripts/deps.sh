#!/bin/sh
# Installs the Debian 12 packages Cairn needs to build, run and test.
# Usage: scripts/deps.sh [--test]   (--test adds the test-only packages)
set -e
need="build-essential pkg-config libfuse3-dev fuse3 attr acl libraft-dev libuv1-dev liburing-dev nbdkit-plugin-dev libsystemd-dev libssl-dev libisal-dev"
if [ "$1" = "--test" ]; then
    need="$need clang clang-format libclang-rt-14-dev python3 python3-pytest openssl xfsprogs rsync fio nbdkit qemu-utils libnbd-bin glusterfs-server debhelper logrotate bash-completion groff-base man-db systemd"
fi
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "Installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q $missing >/dev/null
    # The package starts glusterd where systemd runs; the import test and
    # the benchmark run their own, each in a network namespace of its own.
    case "$missing" in *glusterfs-server*) systemctl disable --now glusterd >/dev/null 2>&1 || true ;; esac
fi
modprobe fuse 2>/dev/null || true
