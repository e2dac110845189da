#!/bin/bash
# Packs the whole-switch bench into one tarball that runs on a Linux host
# without Debian's packages (no DPDK, Open vSwitch, libvirt or Debian python
# there): bench/run-in-root.sh unpacks it and runs bench/run.sh chrooted in it.
#
# Usage: bash bench/pack-root.sh BUILD_DIR OUT.tar.xz
#
# What goes in: every file under /usr, /etc (and /lib, /bin, ...) that a
# `bench/run.sh BUILD_DIR --quick` run here opened or executed (strace), each
# ELF's shared libraries (ldd), and straitd, straitctl, strait-gen and
# strait-calib without their debug info. The DPDK drivers EAL loads from its
# plugin directory are cut to the ones the bench's devices use (the rest, the
# NIC and crypto drivers, would double the size). Run it as root on an idle
# machine, with Open vSwitch installed (the quick run installs it otherwise);
# about 4 minutes in all. The root is about 135 MB, the tarball about 35 MB.
set -eu -o pipefail

[ $# -eq 2 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=$(cd "$1" && pwd)
OUTF=$(realpath -m "$2")
command -v strace > /dev/null || { echo "pack-root: strace not found (apt install strace)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "pack-root: run it as root (the bench runs OVS only as root)" >&2; exit 1; }

T=$(mktemp -d /tmp/strait-pack.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "pack-root: tracing bash bench/run.sh $BUILD --quick (about 3 minutes)" >&2
strace -f -qq -e trace=%file,execve -o "$T/trace" \
    bash "$HERE/run.sh" "$BUILD" --quick --switches ceiling,ovs,strait --out "$T/res" > "$T/bench.log" 2>&1 ||
    { echo "pack-root: the traced bench run failed:" >&2; tail -20 "$T/bench.log" >&2; exit 1; }

# The bench's own binaries, stripped, at the same absolute paths.
BINS=("$BUILD/control/straitd" "$BUILD/control/straitctl/straitctl"
      "$BUILD/bench/strait-gen" "$BUILD/bench/strait-calib")
for b in "${BINS[@]}"; do
    mkdir -p "$T/stage$(dirname "$b")"
    strip --strip-debug -o "$T/stage$b" "$b"
done
printf 'REPO=%q\nBUILD=%q\n' "$REPO" "$BUILD" > "$T/stage/strait-root.env"

/usr/bin/python3 - "$T/trace" "$T/list" "${BINS[@]}" <<'EOF'
import os, re, subprocess, sys
trace, out_list, bins = sys.argv[1], sys.argv[2], sys.argv[3:]
# EAL dlopens every driver in its plugin directory: keep the bench's.
pmd_dir = 'dpdk/pmds-'
pmd_keep = re.compile(r'librte_(bus_vdev|bus_pci|mempool_ring|mempool_stack|net_vhost|'
                      r'net_virtio|net_ring|net_null|net_pcap|net_tap|net_memif)\.so')
call = re.compile(r'^\d+\s+\w+\((.*)\)\s+=\s+(\d+|0x[0-9a-f]+)')  # successful calls only
seen = set()
for line in open(trace, errors='replace'):
    m = call.match(line)
    if m:
        seen.update(p for p in re.findall(r'"(/[^"]*)"', m.group(1))
                    if p.startswith(('/usr/', '/lib', '/bin/', '/sbin/', '/etc/')))
seen.update(['/etc/passwd', '/etc/group', '/etc/nsswitch.conf', '/etc/ld.so.cache'])
out = set()
def add(p):
    # Through the real directories (merged /usr: /lib -> usr/lib), and each
    # symbolic link with what it points to.
    d = os.path.realpath(os.path.dirname(p))
    p = os.path.join(d, os.path.basename(p))
    if p in out or not os.path.lexists(p) or (os.path.isdir(p) and not os.path.islink(p)):
        return
    out.add(p)
    if os.path.islink(p):
        t = os.readlink(p)
        add(t if t.startswith('/') else os.path.join(d, t))
# Only what EAL found in its plugin directory is cut: a driver that some
# program or library links (testpmd links several) stays, with its needs.
# Python's .pth files go: they import packages of their own at start-up
# (namespace packages of python3-neutron's dependencies), which the bench's
# standard-library scripts never use and the root would hold only in part,
# so that every python3 in it would fail before running anything.
for p in seen:
    if p.endswith('.pth'):
        continue
    if pmd_dir not in p or pmd_keep.search(p):
        add(p)
def elf(p):
    with open(p, 'rb') as f:
        return f.read(4) == b'\x7fELF'
for p in sorted(out) + bins:
    if os.path.islink(p) or not elf(p):
        continue
    for line in subprocess.run(['ldd', p], capture_output=True, text=True).stdout.splitlines():
        lib = line.split('=>')[1].split('(')[0].strip() if '=>' in line else line.split('(')[0].strip()
        if lib.startswith('/'):
            add(lib)
out -= set(bins)
open(out_list, 'w').write(''.join(p.lstrip('/') + '\n' for p in sorted(out)))
print(f'pack-root: {len(out)} files from this machine', file=sys.stderr)
EOF
tar -cf - -C / -T "$T/list" -C "$T/stage" . | xz -T0 -6 > "$OUTF"
echo "pack-root: $(du -h "$OUTF" | cut -f1) $OUTF" >&2
echo "$OUTF"
