#!/usr/bin/env bash
# Checks that the straitd of BUILD_DIR (default build-localdpdk) runs on the
# DPDK of meson-dpdk/ and not on the system's: no system librte_* among its
# shared libraries, DPDK's version string from the local build, and a short
# real run (two ports on the drivers it carries, `straitctl show`, a clean
# stop). Run by build.sh; as root (DPDK); no hugepages needed.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build-localdpdk}" && pwd)
STRAITD=$BUILD/control/straitd
STRAITCTL=$BUILD/control/straitctl/straitctl
fail() { echo "meson-dpdk check: FAIL: $*" >&2; exit 1; }

"$STRAITD" --version
if ldd "$STRAITD" | grep -q 'librte_'; then
  ldd "$STRAITD" | grep librte_ >&2
  fail "straitd loads shared DPDK libraries"
fi
# The EAL's compiled-in driver directory (RTE_EAL_PMD_PATH) names its prefix.
PREFIX=$SRC/build-dpdk/prefix
strings "$STRAITD" | grep -F "$PREFIX/" >/dev/null || fail "straitd's EAL is not the one built in $PREFIX"
echo "meson-dpdk check: straitd carries the EAL of $PREFIX statically (no librte_* in ldd)"

DIR=$(mktemp -d /tmp/meson-dpdk-check.XXXXXX)
PID=""
cleanup() {
  [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null && kill -KILL "$PID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
cat >"$DIR/straitd.toml" <<EOF
state_dir = "$DIR/state"
api_socket = "$DIR/api.sock"
[datapath]
workers = [1]
idle_sleep_us = 1000  # a check, not a benchmark: leave the CPU to others
[libvirt]
enabled = false
[metrics]
enabled = false
[vhost]
socket_dir = "$DIR"
EOF
"$STRAITD" --config "$DIR/straitd.toml" -- --no-huge -m 512 --file-prefix "mesontest-$$" \
  --no-pci --vdev net_ring0 >"$DIR/straitd.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  [ -S "$DIR/api.sock" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$DIR/straitd.log" >&2; fail "straitd exited at start"; }
  sleep 0.2
done
[ -S "$DIR/api.sock" ] || { cat "$DIR/straitd.log" >&2; fail "no API socket after 20 s"; }

ctl() { "$STRAITCTL" -s "$DIR/api.sock" "$@"; }
uuid() { cat /proc/sys/kernel/random/uuid; }
ctl network create mesonnet --type local >/dev/null
# net_ring (from the EAL's --vdev) and net_pcap (probed when bound): both
# drivers must be in the binary.
ctl port bind "$(uuid)" --network mesonnet --mac 02:00:00:00:0e:01 --ethdev net_ring0 >/dev/null
ctl port bind "$(uuid)" --network mesonnet --mac 02:00:00:00:0e:02 \
  --ethdev "net_pcap_meson,tx_pcap=$DIR/out.pcap" >/dev/null
ctl show
[ "$(ctl -o json show | grep -o '"net_ring0\|"net_pcap_meson' | sort -u | wc -l)" = 2 ] ||
  fail "straitctl show does not list both ports' devices"

kill -INT "$PID"
rc=0
wait "$PID" || rc=$?
PID=""
[ "$rc" = 0 ] || { tail -20 "$DIR/straitd.log" >&2; fail "straitd exited with $rc on SIGINT"; }
echo "meson-dpdk check: OK (straitd ran on the local DPDK and stopped cleanly)"
