#!/usr/bin/env bash
# make demo: straitd switching between four "VMs" on two networks and a
# physical network, with no hardware at all. Every traffic source is a DPDK
# net_pcap vdev that replays frames made by scapy (scripts/make_demo_pcaps.py)
# forever; what the switch sends goes to /dev/null. Live counters every 2 s.
#
#   scripts/demo.sh [BUILD_DIR]       (default: build; `make demo` passes it)
#   DEMO_SECONDS=N scripts/demo.sh    stop by itself after N seconds
#
# Ctrl-C (or SIGTERM) stops straitd cleanly, removes the temporary files and
# exits 0. Runs as root (DPDK), needs no hugepages.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
STRAITD=$BUILD/control/straitd
STRAITCTL=$BUILD/control/straitctl/straitctl
PY=/usr/bin/python3  # Debian's, with scapy (scripts/bootstrap.sh)
INTERVAL=2
DEMO_SECONDS=${DEMO_SECONDS:-0}

for bin in "$STRAITD" "$STRAITCTL"; do
  [ -x "$bin" ] || { echo "demo: $bin is not built (run: make build)" >&2; exit 2; }
done
case $DEMO_SECONDS in
  '' | *[!0-9]*) echo "demo: DEMO_SECONDS must be a whole number of seconds" >&2; exit 2 ;;
esac

DIR=$(mktemp -d "${TMPDIR:-/tmp}/strait-demo.XXXXXX")
PREFIX=strait-demo-$$
SOCK=$DIR/api.sock
PID=""
STOP=0
STRAITD_RC=0

ctl() { "$STRAITCTL" -s "$SOCK" "$@"; }

# Stops straitd (SIGINT: its clean shutdown), waits for it, removes the files.
cleanup() {
  trap - INT TERM EXIT
  if [ -n "$PID" ]; then
    if kill -0 "$PID" 2>/dev/null; then
      kill -INT "$PID" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$PID" 2>/dev/null; then
        echo "demo: straitd did not stop in 10 s, killing it" >&2
        kill -KILL "$PID" 2>/dev/null || true
      fi
    fi
    wait "$PID" 2>/dev/null && STRAITD_RC=0 || STRAITD_RC=$?
    PID=""
  fi
  rm -rf "$DIR" "/var/run/dpdk/$PREFIX"
}
trap cleanup EXIT
trap 'STOP=1' INT TERM

"$PY" "$SRC/scripts/make_demo_pcaps.py" "$DIR"

cat <<EOF
Strait demo: one straitd, no hardware. Each traffic source is a net_pcap vdev
replaying scapy-made frames in a loop (idle_sleep_us = 0: the worker busy-polls).

  network blue    vlan 100 on physnet1   vm1 02:00:00:00:01:01 10.0.1.1
                                         vm2 02:00:00:00:01:02 10.0.1.2
  network green   local (this host)      vm3 02:00:00:00:02:03 10.0.2.3
                                         vm4 02:00:00:00:02:04 10.0.2.4
  physnet1        the "NIC": gateway 10.0.1.254 (02:00:00:00:00:fe) behind VLAN 100

  traffic: vm1<->vm2 and vm3<->vm4 unicast; ARP broadcasts, flooded inside
  their own network only; vm1/vm2 -> gateway (leaves physnet1 tagged 100);
  gateway -> vm1/vm2 (tagged 100 on the wire, untagged at the VM); and VLAN
  999 frames from physnet1 that no network owns (dropped: unknown_vlan).

Counters every ${INTERVAL} s; Ctrl-C stops.
EOF

# straitd runs in its own session: Ctrl-C reaches this script only, which
# then stops straitd itself (and waits for it).
(cd "$DIR" && exec setsid "$STRAITD" --config "$SRC/config/demo.toml" -- \
  --no-huge -m 512 --no-pci --file-prefix "$PREFIX" >"$DIR/straitd.log" 2>&1) &
PID=$!
for _ in $(seq 300); do
  grep -q " ready" "$DIR/straitd.log" 2>/dev/null && break
  if ! kill -0 "$PID" 2>/dev/null || [ "$STOP" = 1 ]; then break; fi
  sleep 0.1
done
if ! grep -q " ready" "$DIR/straitd.log" 2>/dev/null; then
  echo "demo: straitd did not start:" >&2
  cat "$DIR/straitd.log" >&2
  exit 1
fi

ctl network create blue --type vlan --physnet physnet1 --segmentation-id 100 >/dev/null
ctl network create green --type local >/dev/null
n=0
: >"$DIR/names"
echo "physnet:physnet1 physnet1" >>"$DIR/names"
while read -r name net mac ip; do
  n=$((n + 1))
  uuid=$(printf 'de000000-0000-4000-8000-%012d' "$n")
  ctl port bind "$uuid" --network "$net" --mac "$mac" --ip "$ip" \
    --ethdev "net_pcap_$name,rx_pcap=$DIR/$name.pcap,infinite_rx=1,tx_pcap=/dev/null" >/dev/null
  echo "$uuid $name" >>"$DIR/names"
done <"$DIR/topology.txt"
echo
ctl show
echo

# One line of packet rates from two `stats -o json` samples, by port name.
rates() {
  "$PY" - "$DIR/names" "$1" "$2" "$3" <<'PYEOF'
import json, sys
names = dict(line.split()[:2] for line in open(sys.argv[1]))
order = list(names)
prev, cur, dt = json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), float(sys.argv[4])
before = {p["id"]: p for p in prev["ports"]}
parts = []
for p in sorted(cur["ports"], key=lambda p: order.index(p["id"]) if p["id"] in order else 99):
    q = before.get(p["id"])
    if q is None or dt <= 0:
        continue
    rx = (p["rx_packets"] - q["rx_packets"]) / dt / 1e6
    tx = (p["tx_packets"] - q["tx_packets"]) / dt / 1e6
    parts.append(f"{names.get(p['id'], p['id'][:8])} rx {rx:.2f} tx {tx:.2f}")
pkts = sum(w["packets"] for w in cur["workers"]) - sum(w["packets"] for w in prev["workers"])
print(f"Mpps over {dt:.1f} s: " + " | ".join(parts) + f"  || switched {pkts / dt / 1e6:.2f} Mpps")
PYEOF
}

set +e  # from here on a failed sample (e.g. interrupted) must not end the demo uncleanly
start=$(date +%s)
prev_t=$(date +%s.%N)
ctl -o json stats >"$DIR/prev.json"
while [ "$STOP" = 0 ]; do
  sleep "$INTERVAL" &
  wait $! 2>/dev/null
  [ "$STOP" = 1 ] && break
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "demo: straitd exited unexpectedly:" >&2
    tail -n 20 "$DIR/straitd.log" >&2
    exit 1
  fi
  now_t=$(date +%s.%N)
  table=$(ctl stats) || continue
  ctl -o json stats >"$DIR/cur.json" || continue
  [ -t 1 ] && printf '\033[H\033[2J'
  echo "--- $(date '+%F %T')  (Ctrl-C to stop)"
  echo "$table"
  rates "$DIR/prev.json" "$DIR/cur.json" "$(awk -v a="$now_t" -v b="$prev_t" 'BEGIN { print a - b }')"
  echo
  mv "$DIR/cur.json" "$DIR/prev.json"
  prev_t=$now_t
  if [ "$DEMO_SECONDS" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$DEMO_SECONDS" ]; then
    break
  fi
done

cleanup
if [ "$STRAITD_RC" = 0 ]; then
  echo "demo: straitd stopped cleanly"
  exit 0
fi
echo "demo: straitd exited with status $STRAITD_RC" >&2
exit 1
