#!/usr/bin/env bash
# make demo: straitd switching between six "VMs" attached through vhost-user,
# on two networks and a physical network, with no hardware at all.
#
# A VM here is a DPDK virtio-user port: the same virtio device and the same
# vhost-user protocol as a QEMU guest's, in server mode (the VM owns the
# socket, as QEMU under libvirt mode='server'), and straitd connects to it
# (`straitctl port bind ... --vhost SOCKET`). VMs come in pairs: one
# strait-gen process (build/bench/strait-gen, one thread) is two VMs, its
# port 0 sending as fast as it can, its port 1 receiving. The physical NIC is
# a net_pcap vdev that replays frames made by scapy
# (scripts/make_demo_pcaps.py) forever and sends to /dev/null. Live counters
# every 2 s.
#
#   scripts/demo.sh [BUILD_DIR]       (default: build; `make demo` passes it)
#   DEMO_SECONDS=N scripts/demo.sh    stop by itself after N seconds
#
# Ctrl-C (or SIGTERM) stops the VMs, then straitd, removes the temporary
# files and exits 0. If a VM or straitd dies, the demo says so, stops the
# rest and exits 1. Runs as root (DPDK), needs no hugepages, and uses two
# CPUs: straitd's worker alone on CPU 1, everything else on CPU 0.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
STRAITD=$BUILD/control/straitd
STRAITCTL=$BUILD/control/straitctl/straitctl
GEN=$BUILD/bench/strait-gen
PY=/usr/bin/python3  # Debian's, with scapy (scripts/bootstrap.sh)
INTERVAL=2
UP_TIMEOUT=30  # seconds for every VM port to come up
DEMO_SECONDS=${DEMO_SECONDS:-0}

for bin in "$STRAITD" "$STRAITCTL" "$GEN"; do
  [ -x "$bin" ] || { echo "demo: $bin is not built (run: make build)" >&2; exit 2; }
done
case $DEMO_SECONDS in
  '' | *[!0-9]*) echo "demo: DEMO_SECONDS must be a whole number of seconds" >&2; exit 2 ;;
esac

# This script and all it starts run on CPU 0; straitd's worker (EAL lcore 1)
# is the only thread EAL moves to CPU 1.
taskset -pc 0 $$ >/dev/null

# The VM pairs, one strait-gen each: the pair's name, its network, the
# sending VM (port 0) and its MAC, the receiving VM (port 1) and its MAC, and
# the destination MAC of what the sender sends.
GATEWAY_MAC=02:00:00:00:00:fe  # behind physnet1 (scripts/make_demo_pcaps.py)
PAIRS=(
  "g1 blue  vm1 02:00:00:00:01:01 vm2 02:00:00:00:01:02 02:00:00:00:01:02"
  "g2 green vm3 02:00:00:00:02:03 vm4 02:00:00:00:02:04 02:00:00:00:02:04"
  "g3 blue  vm5 02:00:00:00:01:05 vm6 02:00:00:00:01:06 $GATEWAY_MAC"
)
declare -A ROLE=(
  [vm1]="sends to vm2 (VM-to-VM)" [vm2]="receives from vm1"
  [vm3]="sends to vm4 (VM-to-VM)" [vm4]="receives from vm3"
  [vm5]="sends to the gateway (VM-to-NIC)" [vm6]="receives from the gateway (NIC-to-VM)"
)

DIR=$(mktemp -d "${TMPDIR:-/tmp}/strait-demo.XXXXXX")
PREFIX=strait-demo-$$
SOCK=$DIR/api.sock
PID=""                 # straitd
declare -A GEN_PID=()  # pair -> strait-gen pid
STOP=0
STRAITD_RC=0
STOPPED_RC=0
SUMMARY=0

ctl() { "$STRAITCTL" -s "$SOCK" "$@"; }

# Stops process $1 (SIGINT: a clean shutdown), waiting up to $3 tenths of a
# second before SIGKILL; its exit status goes to STOPPED_RC. $2 names it.
stop_pid() {
  local pid=$1 what=$2
  if kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq "$3"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "demo: $what did not stop in $(($3 / 10)) s, killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null && STOPPED_RC=0 || STOPPED_RC=$?
}

# What a pair's strait-gen counted itself (its RESULT line: the rates over
# its whole run after a 1 s warm-up), once it stopped.
gen_summary() {
  local g=$1 line a b tx rx
  line=$(grep -m1 '^RESULT' "$DIR/$g.log" 2>/dev/null) || return 0
  read -r a b <<<"$(grep " $g\$" "$DIR/pairs" | cut -d' ' -f1 | tr '\n' ' ')"
  tx=$(sed -n 's/.* tx_mpps=\([0-9.]*\).*/\1/p' <<<"$line")
  rx=$(sed -n 's/.* rx_mpps=\([0-9.]*\).*/\1/p' <<<"$line")
  [ -n "$tx" ] || return 0  # stopped during its warm-up: no count
  echo "demo: strait-gen $g counted: $a sent ${tx:-?} Mpps, $b received ${rx:-?} Mpps"
}

# Stops the VMs (their ports go down), then straitd; removes every file.
cleanup() {
  trap - INT TERM EXIT
  local p
  local g
  for g in "${!GEN_PID[@]}"; do kill -INT "${GEN_PID[$g]}" 2>/dev/null || true; done
  for g in "${!GEN_PID[@]}"; do stop_pid "${GEN_PID[$g]}" "strait-gen $g" 50; done
  GEN_PID=()
  if [ "$SUMMARY" = 1 ]; then
    for p in "${PAIRS[@]}"; do gen_summary "${p%% *}"; done
  fi
  if [ -n "$PID" ]; then
    stop_pid "$PID" straitd 100
    STRAITD_RC=$STOPPED_RC
    PID=""
  fi
  rm -rf "$DIR" "/var/run/dpdk/$PREFIX"
  for p in "${PAIRS[@]}"; do rm -rf "/var/run/dpdk/$PREFIX-${p%% *}"; done
}
# Whenever the script ends early (an error, or Ctrl-C while starting): clean
# up; Ctrl-C still ends with 0 if everything stopped cleanly.
on_exit() {
  local rc=$?
  cleanup
  if [ "$STOP" = 1 ] && [ "$STRAITD_RC" = 0 ]; then exit 0; fi
  exit "$rc"
}
trap on_exit EXIT
# HUP and PIPE (the terminal closed, `make demo | head` done reading) stop it
# as Ctrl-C does: straitd and the VMs run in sessions of their own, and a
# script killed by either signal would leave them running. They stay trapped
# during the cleanup, whose lines then go nowhere.
trap 'STOP=1' INT TERM HUP PIPE

# Returns 0 (and says which, with the end of its log) if straitd or a VM
# process is gone.
something_died() {
  local g rc a b
  if ! kill -0 "$PID" 2>/dev/null; then
    wait "$PID" 2>/dev/null && rc=0 || rc=$?
    PID=""
    echo "demo: straitd exited unexpectedly (status $rc); stopping the demo:" >&2
    tail -n 20 "$DIR/straitd.log" >&2
    return 0
  fi
  for g in "${!GEN_PID[@]}"; do
    if ! kill -0 "${GEN_PID[$g]}" 2>/dev/null; then
      wait "${GEN_PID[$g]}" 2>/dev/null && rc=0 || rc=$?
      unset "GEN_PID[$g]"
      read -r a b <<<"$(grep " $g\$" "$DIR/pairs" | cut -d' ' -f1 | tr '\n' ' ')"
      [ "$rc" -gt 128 ] && rc="$rc (killed by signal $((rc - 128)))"
      echo "demo: VMs $a and $b died: their strait-gen ($g) exited with status $rc;" \
        "stopping the demo. The end of its log:" >&2
      tail -n 5 "$DIR/$g.log" | sed 's/^/  /' >&2
      return 0
    fi
  done
  return 1
}

"$PY" "$SRC/scripts/make_demo_pcaps.py" "$DIR"

cat <<EOF
Strait demo: one straitd and six "VMs" attached through vhost-user, no
hardware. Each VM is a DPDK virtio-user device (what a QEMU guest's virtio-net
is) that owns its vhost-user socket, as QEMU does under libvirt
mode='server'; straitd connects to it. The VMs come in pairs, one strait-gen
process per pair: the first VM sends 64-byte UDP frames (16 flows) as fast as
it can, the second receives. The physical NIC of physnet1 is a net_pcap that
sends to /dev/null and replays physnet1.pcap as fast as the switch polls it:
more than vm6 can drain, so most of that is dropped at vm6's full ring
(tx_full). straitd's worker busy-polls alone on CPU 1; straitd's control
thread and the three strait-gen processes (nice 10) share CPU 0, so the VMs
take turns and their rates move.

  network blue    vlan 100 on physnet1   vm1 -> vm2            VM-to-VM
                                         vm5 -> gateway        VM-to-NIC (tagged 100 on the wire)
                                         gateway -> vm6        NIC-to-VM (untagged at the VM)
  network green   local (this host)      vm3 -> vm4            VM-to-VM, never on the NIC
  physnet1        the NIC: gateway ${GATEWAY_MAC} (10.0.1.254) behind VLAN 100;
                  it also floods an ARP broadcast to blue's VMs and sends
                  VLAN 999 frames that no network owns (dropped: unknown_vlan)

Counters every ${INTERVAL} s (the drops counted before the VMs were up stay in
the totals: port_down, flood_no_target); Ctrl-C stops.
EOF

# straitd and the VMs run in sessions of their own: Ctrl-C reaches this
# script only, which then stops them itself, VMs first (and waits for them).
(cd "$DIR" && exec setsid "$STRAITD" --config "$SRC/config/demo.toml" -- \
  -l 0,1 --main-lcore 0 --no-huge -m 512 --no-pci --file-prefix "$PREFIX" \
  >"$DIR/straitd.log" 2>&1) &
PID=$!
for _ in $(seq 300); do
  grep -q "straitd .* ready: " "$DIR/straitd.log" 2>/dev/null && break
  if ! kill -0 "$PID" 2>/dev/null || [ "$STOP" = 1 ]; then break; fi
  sleep 0.1
done
if ! grep -q "straitd .* ready: " "$DIR/straitd.log" 2>/dev/null; then
  [ "$STOP" = 1 ] && exit 0
  echo "demo: straitd did not start:" >&2
  cat "$DIR/straitd.log" >&2
  exit 1
fi

ctl network create blue --type vlan --physnet physnet1 --segmentation-id 100 >/dev/null
ctl network create green --type local >/dev/null

# Each VM pair: start its strait-gen (a virtio-user server waits inside EAL
# init for straitd to connect to its sockets, one after the other), then bind
# its two ports; straitd's vhost client retries until the socket is there.
echo "physnet:physnet1 physnet1 trunk the NIC: pcap replay in, /dev/null out" >"$DIR/names"
: >"$DIR/pairs"
n=0
for p in "${PAIRS[@]}"; do
  read -r g net a ma b mb dst <<<"$p"
  (exec setsid nice -n 10 "$GEN" --no-huge -m 256 --no-shconf --file-prefix "$PREFIX-$g" \
    --no-pci -l 0 \
    --vdev "virtio_user0,path=$DIR/$a.sock,server=1,queue_size=1024" \
    --vdev "virtio_user1,path=$DIR/$b.sock,server=1,queue_size=1024" \
    -- --size 64 --flows 16 --warmup 1 --duration 86400 --link-timeout "$UP_TIMEOUT" \
    --src-mac "$ma" --dst-mac "$dst" >"$DIR/$g.log" 2>&1) &
  GEN_PID[$g]=$!
  for vm in "$a $ma" "$b $mb"; do
    read -r name mac <<<"$vm"
    n=$((n + 1))
    uuid=$(printf 'de000000-0000-4000-8000-%012d' "$n")
    ctl port bind "$uuid" --network "$net" --mac "$mac" --vhost "$DIR/$name.sock" >/dev/null
    echo "$uuid $name $net ${ROLE[$name]}" >>"$DIR/names"
    echo "$name $g" >>"$DIR/pairs"
  done
done

# Every VM port up: straitd connected and the VM's driver set up its rings.
t0=$(date +%s.%N)
deadline=$(($(date +%s) + UP_TIMEOUT))
while :; do
  up=$(ctl -o json port list | grep -cE '"state": ?"up"') || true
  [ "$up" = "$n" ] && break
  if [ "$STOP" = 1 ]; then exit 0; fi
  if something_died; then exit 1; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "demo: only $up of $n VM ports came up in $UP_TIMEOUT s:" >&2
    ctl port list >&2
    for p in "${PAIRS[@]}"; do tail -n 5 "$DIR/${p%% *}.log" >&2; done
    exit 1
  fi
  sleep 0.1
done
echo
echo "demo: all $n VM ports are up (vhost-user, straitd is the client) after" \
  "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s"
echo
ctl show
echo

# A table of packet rates, per VM, from two `stats -o json` samples.
rates() {
  "$PY" - "$DIR/names" "$1" "$2" "$3" "$4" <<'PYEOF'
import json, sys
names = {}
for line in open(sys.argv[1]):
    uuid, name, net, role = line.rstrip("\n").split(" ", 3)
    names[uuid] = (name, net, role)
prev, cur, show = (json.load(open(f)) for f in sys.argv[2:5])
dt = float(sys.argv[5])
state = {p["id"]: p.get("state", "?") for p in show.get("ports", [])}
state.update({"physnet:" + p["name"]: p.get("state", "?") for p in show.get("physnets", [])})
before = {p["id"]: p for p in prev["ports"]}
print(f"Mpps over {dt:.1f} s (IN: the switch received from it, OUT: the switch sent to it)")
print(f"{'NAME':9} {'NETWORK':8} {'STATE':6} {'ROLE':42} {'IN':>7} {'OUT':>7} {'DROP':>7}")
for uuid, (name, net, role) in names.items():
    p = next((p for p in cur["ports"] if p["id"] == uuid), None)
    q = before.get(uuid)
    if p is None or q is None or dt <= 0:
        print(f"{name:9} {net:8} {state.get(uuid, 'gone'):6} {role:42}       -       -       -")
        continue
    rx = (p["rx_packets"] - q["rx_packets"]) / dt / 1e6
    tx = (p["tx_packets"] - q["tx_packets"]) / dt / 1e6
    drop = (sum(p.get("drops", {}).values()) - sum(q.get("drops", {}).values())) / dt / 1e6
    print(f"{name:9} {net:8} {state.get(uuid, '?'):6} {role:42} {rx:7.3f} {tx:7.3f} {drop:7.3f}")
w0 = {w["id"]: w for w in prev["workers"]}
pkts = busy = cycles = 0
for w in cur["workers"]:
    o = w0.get(w["id"], {})
    pkts += w["packets"] - o.get("packets", 0)
    b = w["busy_cycles"] - o.get("busy_cycles", 0)
    busy += b
    cycles += b + w["idle_cycles"] - o.get("idle_cycles", 0)
load = f", busy {100 * busy / cycles:.0f}%" if cycles > 0 else ""
print(f"switched {pkts / dt / 1e6:.2f} Mpps (worker on CPU 1{load})")
PYEOF
}

set +e  # from here on a failed sample (e.g. interrupted) must not end the demo uncleanly
SUMMARY=1
start=$(date +%s)
prev_t=$(date +%s.%N)
ctl -o json stats >"$DIR/prev.json"
while [ "$STOP" = 0 ]; do
  sleep "$INTERVAL" &
  wait $! 2>/dev/null
  [ "$STOP" = 1 ] && break
  if something_died; then
    SUMMARY=0
    exit 1
  fi
  now_t=$(date +%s.%N)
  table=$(ctl stats) || continue
  ctl -o json stats >"$DIR/cur.json" || continue
  ctl -o json show >"$DIR/show.json" || continue
  [ -t 1 ] && printf '\033[H\033[2J'
  echo "--- $(date '+%F %T')  (Ctrl-C to stop)"
  echo "$table"
  echo
  rates "$DIR/prev.json" "$DIR/cur.json" "$DIR/show.json" \
    "$(awk -v a="$now_t" -v b="$prev_t" 'BEGIN { print a - b }')"
  echo
  mv "$DIR/cur.json" "$DIR/prev.json"
  prev_t=$now_t
  if [ "$DEMO_SECONDS" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$DEMO_SECONDS" ]; then
    break
  fi
done

echo "demo: stopping the VMs, then straitd"
cleanup
if [ "$STRAITD_RC" = 0 ]; then
  echo "demo: straitd stopped cleanly"
  exit 0
fi
echo "demo: straitd exited with status $STRAITD_RC" >&2
exit 1
