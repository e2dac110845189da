#!/bin/bash
# Runs bench/run.sh on a host without Debian's packages, chrooted in the
# root bench/pack-root.sh made: unpacks it (once per ROOT_DIR), mounts /proc,
# /sys, /dev and hugetlbfs in it, copies this checkout (without build/ and
# .git) to the checkout's path at pack time, runs the bench there as root, and
# copies its JSON and a tarball of its logs to OUT_DIR; the last line printed
# is the JSON file's path there.
#
# Usage: bash bench/run-in-root.sh ROOT.tar.xz OUT_DIR [bench/run.sh options]
#   ROOT_DIR=/tmp/strait-root  where the root is unpacked (env)
# Hugepages: 1024 x 2 MB are reserved when the host allows it, else the
# bench runs with --no-huge. The mounts stay until the host goes down (or
# `umount -R ROOT_DIR/{proc,sys,dev,run}`).
set -u -o pipefail

[ $# -ge 2 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
TARBALL=$(realpath "$1") || exit 2
OUTD=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
RF=${ROOT_DIR:-/tmp/strait-root}
T0=$(date +%s)
say() { echo "[run-in-root $(( $(date +%s) - T0 ))s] $*" >&2; }
mkdir -p "$OUTD" || exit 1
[ "$(id -u)" = 0 ] || { say "run it as root (chroot, mounts)"; exit 1; }

{ echo "host: $(uname -r); $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  grep -E 'MemTotal|HugePages_Total|Hugepagesize' /proc/meminfo | tr -s ' ' | tr '\n' ' '; echo
} | tee "$OUTD/host.txt" >&2

if [ ! -f "$RF/strait-root.env" ]; then
    mkdir -p "$RF" || exit 1
    # Python's tarfile where the host has no xz
    tar -C "$RF" -xJf "$TARBALL" 2>/dev/null ||
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$TARBALL" "$RF" ||
        { say "cannot unpack $TARBALL"; exit 1; }
    for d in bin sbin lib lib64; do [ -e "$RF/$d" ] || ln -s usr/$d "$RF/$d"; done
    mkdir -p "$RF"/{proc,sys,dev,tmp,run,var,root}
    [ -e "$RF/var/run" ] || ln -s /run "$RF/var/run"
    chmod 1777 "$RF/tmp"
    say "unpacked: $(du -sh "$RF" | cut -f1) in $RF"
fi
# shellcheck source=/dev/null
. "$RF/strait-root.env"   # REPO, BUILD: the paths at pack time
mountpoint -q "$RF/proc" || mount -t proc proc "$RF/proc" || exit 1
mountpoint -q "$RF/sys" || mount --rbind /sys "$RF/sys" || exit 1
mountpoint -q "$RF/dev" || mount --rbind /dev "$RF/dev" || exit 1
mountpoint -q "$RF/run" || mount -t tmpfs tmpfs "$RF/run" || exit 1
MEM=--no-huge
mkdir -p "$RF/dev/hugepages" 2>/dev/null
if grep -q " $RF/dev/hugepages hugetlbfs" /proc/mounts || mount -t hugetlbfs nodev "$RF/dev/hugepages" 2>/dev/null; then
    [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 1024 ] || echo 1024 > /proc/sys/vm/nr_hugepages 2>/dev/null
    [ "$(cat /proc/sys/vm/nr_hugepages)" -ge 768 ] && MEM=--huge
fi
say "memory: $MEM"
mkdir -p "$RF$REPO" &&
    tar -C "$HERE/.." --exclude=./build --exclude='./build-*' --exclude=./.git -cf - . | tar -C "$RF$REPO" -xf - ||
    { say "cannot copy the checkout to $RF$REPO"; exit 1; }
rm -rf "$RF/tmp/strait-res"
chroot "$RF" /usr/bin/env -i PATH=/usr/sbin:/usr/bin HOME=/root LANG=C.UTF-8 \
    /usr/bin/bash -c 'cd "$1" && shift && exec bash bench/run.sh "$@"' bash "$REPO" \
    "$BUILD" --out /tmp/strait-res $MEM "$@" 2>&1 | tee "$OUTD/bench.log"
rc=$?
cp "$RF"/tmp/strait-res/*.json "$OUTD/" 2>/dev/null
tar -C "$RF/tmp/strait-res" -czf "$OUTD/logs.tgz" . 2>/dev/null
say "bench/run.sh exited $rc; $OUTD: $(ls "$OUTD" | tr '\n' ' ')"
# As bench/run.sh: the last line is the JSON file's path (here, outside the root).
json=$(tail -1 "$OUTD/bench.log")
[ "$rc" = 0 ] && [ -f "$OUTD/$(basename "$json")" ] && realpath "$OUTD/$(basename "$json")"
exit $rc
