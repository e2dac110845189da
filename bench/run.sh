#!/bin/bash
# Whole-switch benchmark: the same generator (strait-gen) and the same
# vhost-user devices in front of each switch, switches alternated rep by rep
# (ABAB) in one run, because this 2-vCPU cloud VM drifts by up to 2x within
# minutes (see bench/README.md).
#
# Usage: bash bench/run.sh BUILD_DIR [options]
#   --quick            1 rep of each scenario and switch at 64 B, 1 flow,
#                      with shorter reps (1 s warm-up + 3 s measured, unless
#                      --warmup/--duration are given); control plane: 1 rep,
#                      3 rule changes (about 2 min in all)
#   --reps N           reps per point and switch (default 5)
#   --duration S       measured seconds per rep (default 5; --quick: 3)
#   --warmup S         warm-up seconds before measuring (default 2; --quick: 1)
#   --sizes LIST       frame sizes incl. FCS (default 64,1518)
#   --flows LIST       flow counts (default 1,1000,100000)
#   --scenarios LIST   default l2,vlan,vlan_sg,vxlan: l2, vlan (local VLAN,
#                      OVS: br-int NORMAL), vlan_sg (stateful security
#                      groups: conntrack for every packet, as neutron's
#                      openvswitch firewall in OVS), vxlan (encap: VM ->
#                      remote VTEP on the underlay; OVS: br-int -> br-tun ->
#                      vxlan port -> br-phy, as neutron's OVS agent); also
#                      vxlan_decap (VXLAN from a remote VTEP -> VM; OVS too)
#                      and vlan_sg_default (Strait only: neutron's default
#                      group + 20 port rules) and vlan_sg_new (Strait
#                      only: vlan_sg with every frame a new connection,
#                      16M flows, once per size; ct_new_per_busy_s = new
#                      connections per second of the worker's busy time)
#                      and vlan_sg_churn (Strait only: vlan_sg while a
#                      group no bench port is in gets a rule created or
#                      deleted every second, each change one snapshot:
#                      what unrelated rule changes cost; rule_changes = how
#                      many the rep saw; ratio to vlan_sg printed), and
#                      vlan_phys / vlan_phys_churn (Strait only: port 1 with
#                      vlan_sg's group on a VLAN provider network whose
#                      physnet is the sink; MACs age after 1 s; with
#                      _churn the sink side sends 1000 new MACs a second
#                      for the switch to learn and age; ratio printed);
#                      run the tunnels with l2 or vlan for the tunnel's
#                      cost (ratio printed); l2_trunk and l2_qos (Strait
#                      only, issue 25: l2 through a trunk's subport, and
#                      l2 with QoS limits that drop nothing and DSCP
#                      marking): run with l2 for each feature's cost per
#                      frame (Mpps and cycles per packet, ratio printed)
#   --switches LIST    default ceiling,ovs,strait (ceiling = dpdk-testpmd io,
#                      run in every scenario; ovs = Open vSwitch with DPDK,
#                      bench/ovs.sh, installed as root on first use; when it
#                      cannot be, the run goes on without it and says why),
#                      plus strait_meson when built (the same Strait built
#                      against meson-dpdk/'s DPDK: build-localdpdk/).
#                      STRAITD_MESON=PATH runs that straitd as strait_meson
#                      instead: two builds A/B'd rep by rep in one run, with
#                      strait_meson/strait printed
#   --workers LIST     multi-worker scaling: for each N of LIST (e.g.
#                      1,2,4,7), N generator/sink pairs against the switch
#                      with N forwarding threads (straitd workers, testpmd
#                      forwarding lcores, OVS PMD threads) on cores 1..N,
#                      one strait-gen per pair on cores N+1..2N, the rest on
#                      core 0; an N needing more than the machine's CPUs is
#                      skipped (N=1 on 2 CPUs: the generator shares core 0,
#                      as without --workers). Each pair is a network of its
#                      own (scenarios l2, vlan, vlan_sg); Strait and OVS
#                      rebalance their rx queues by load (workers.rebalance,
#                      dpif-netdev/pmd-rxq-rebalance) once every pair's
#                      traffic runs, in the warm-up (default 4 s here);
#                      Mpps are the pairs' sum, and the scaling table sets
#                      each N against N x the same switch's 1-worker figure
#   --no-huge          all DPDK processes use --no-huge (memfd) memory
#   --huge             use 2 MB hugepages (default when root; reserves them
#                      in /proc/sys/vm/nr_hugepages if needed, restores after)
#   --out DIR          where the JSON and logs go (default BUILD_DIR/bench-results)
#   --keep             keep the temp dir (runtime state, logs) after the run
# Control plane (issue 8), after the throughput points, same run and JSON:
#   --control-switches LIST  default strait,ovs (ovs: skipped with a message
#                      when Open vSwitch with DPDK is not installed)
#   --control-ports N  ports of control_N_ports (default 1000, --quick too)
#   --control-reps N   reps per switch, switches alternated (default 3;
#                      --quick: 1)
#   --rule-changes N   rule changes timed per rep (default 10; --quick: 3)
#   --control-only     only the control-plane points (no throughput)
#   --no-control       only the throughput points
# The last line printed is the path of the JSON results file.
#
# Cores: core 1 = the switch's forwarding thread, alone (testpmd's forwarding
# lcore / straitd's single worker); core 0 = strait-gen (generator + sink,
# one thread) + the switch's main/control threads.
#
# Adding a switch X: define sw_X_check (prints why X cannot run, returns 1),
# sw_X_start SCENARIO SOCK1 SOCK2 LOG (background, sets SW_PID; returns 0 once
# it is attaching to both sockets as vhost-user client; prints why on failure),
# sw_X_stop (stops SW_PID; may write "key=value ..." to $W/metrics.txt, kept
# per rep), and sw_X_desc (one line for the header); then list X in --switches.
# Optional: sw_X_supports SCENARIO (returns 1 if X has no such scenario: no
# row, no failure), sw_X_cleanup (called at teardown, even on ^C) and, for
# --workers, sw_X_traffic_runs (called once in the warm-up, when every
# pair's traffic runs: Strait rebalances its rx queues there; its output
# goes to the switch's log).
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
BUILD=$(cd "$1" 2>/dev/null && pwd) || { echo "bench: no build dir $1" >&2; exit 2; }
shift

REPS=5 DUR= WARM=
SIZES=64,1518 FLOWS=1,1000,100000 SCENARIOS=l2,vlan,vlan_sg,vxlan SWITCHES=ceiling,ovs,strait
STRAITD_MESON=${STRAITD_MESON:-$(cd "$HERE/.." && pwd)/build-localdpdk/control/straitd}  # meson-dpdk/build.sh
[ -x "$STRAITD_MESON" ] && SWITCHES+=,strait_meson
MEM=auto OUT= KEEP=0 QUICK=0 WORKERS= WORKERS_MODE=0
CTL_SWITCHES=strait,ovs CTL_PORTS= CTL_REPS= CTL_CHANGES= CONTROL=1 THROUGHPUT=1
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1; shift ;;
    --reps) REPS=$2; shift 2 ;;
    --duration) DUR=$2; shift 2 ;;
    --warmup) WARM=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --flows) FLOWS=$2; shift 2 ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    --switches) SWITCHES=$2; shift 2 ;;
    --workers) WORKERS=$2; WORKERS_MODE=1; shift 2 ;;
    --no-huge) MEM=nohuge; shift ;;
    --huge) MEM=huge; shift ;;
    --out) OUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --control-switches) CTL_SWITCHES=$2; shift 2 ;;
    --control-ports) CTL_PORTS=$2; shift 2 ;;
    --control-reps) CTL_REPS=$2; shift 2 ;;
    --rule-changes) CTL_CHANGES=$2; shift 2 ;;
    --control-only) THROUGHPUT=0; shift ;;
    --no-control) CONTROL=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
# --quick: every scenario and switch once at 64 B and 1 flow, shorter reps
# (1 s warm-up + 3 s measured) and one control-plane rep with 3 rule
# changes (still 1000 ports), so that the whole run stays under 3 minutes
# on this 2-vCPU machine (about 105 s when idle). Options given explicitly
# (--warmup, --duration, --control-*) win.
if [ $QUICK = 1 ]; then REPS=1; SIZES=64; FLOWS=1; fi
DUR=${DUR:-$([ $QUICK = 1 ] && echo 3 || echo 5)}
# --workers: the rebalance runs in the warm-up, 1-2 s into it
WARM=${WARM:-$([ $WORKERS_MODE = 1 ] && echo 4 || { [ $QUICK = 1 ] && echo 1 || echo 2; })}
CTL_PORTS=${CTL_PORTS:-1000}
CTL_REPS=${CTL_REPS:-$([ $QUICK = 1 ] && echo 1 || echo 3)}
CTL_CHANGES=${CTL_CHANGES:-$([ $QUICK = 1 ] && echo 3 || echo 10)}
for v in "$REPS" "$DUR" "$WARM" "$CTL_PORTS" "$CTL_REPS" "$CTL_CHANGES"; do
    [[ $v =~ ^[0-9]+$ ]] || { echo "bench: --reps/--duration/--warmup/--control-* /--rule-changes take whole numbers" >&2; exit 2; }
done
[ "$CTL_PORTS" -ge 1 ] && [ "$CTL_PORTS" -le 1000 ] ||
    { echo "bench: --control-ports: 1..1000 (rte_vhost holds 1024 sockets)" >&2; exit 2; }
[ "$CTL_REPS" -ge 1 ] && [ "$CTL_CHANGES" -ge 1 ] || { echo "bench: --control-reps and --rule-changes must be >= 1" >&2; exit 2; }
[ $THROUGHPUT = 1 ] || [ $CONTROL = 1 ] || { echo "bench: --control-only and --no-control: nothing to run" >&2; exit 2; }
[ "$REPS" -ge 1 ] && [ "$DUR" -ge 1 ] || { echo "bench: --reps and --duration must be >= 1" >&2; exit 2; }
IFS=, read -r -a SIZE_L <<< "$SIZES"
IFS=, read -r -a FLOW_L <<< "$FLOWS"
IFS=, read -r -a SCEN_L <<< "$SCENARIOS"
IFS=, read -r -a SW_L <<< "$SWITCHES"
IFS=, read -r -a CTL_SW_L <<< "$CTL_SWITCHES"
IFS=, read -r -a WORKERS_L <<< "${WORKERS:-1}"
for v in "${WORKERS_L[@]}"; do
    [[ $v =~ ^[0-9]+$ ]] && [ "$v" -ge 1 ] && [ "$v" -le 64 ] || { echo "bench: --workers takes whole numbers 1..64" >&2; exit 2; }
done
if [ $WORKERS_MODE = 1 ]; then
    for sc in ${SCENARIOS//,/ }; do
        case $sc in l2|vlan|vlan_sg) ;;
        *) echo "bench: --workers runs the scenarios l2, vlan and vlan_sg only (not $sc)" >&2; exit 2 ;;
        esac
    done
fi
[ $THROUGHPUT = 1 ] || SW_L=()

GEN_CPU=0          # strait-gen + every non-forwarding thread
SW_CPU=1           # the switch's forwarding thread, alone
NPROC=$(nproc)
# --workers N: the forwarding threads on cores 1..N (SW_CPU: the first), a
# strait-gen per generator/sink pair on cores N+1..2N (without --workers, or
# when the machine has fewer CPUs and N is 1: the one strait-gen on core 0).
NW=1 FWD_CPUS=(1) GEN_CPUS=(0) SOCKS=()   # SOCKS: every pair's two sockets (run_one)
set_layout() { # N
    local i
    NW=$1 FWD_CPUS=() GEN_CPUS=()
    for ((i = 1; i <= NW; i++)); do FWD_CPUS+=($i); done
    if [ $WORKERS_MODE = 1 ] && [ $((2 * NW + 1)) -le "$NPROC" ]; then
        for ((i = NW + 1; i <= 2 * NW; i++)); do GEN_CPUS+=($i); done
    else
        GEN_CPUS=($GEN_CPU)
    fi
    SW_CPU=${FWD_CPUS[0]}
    OVS_PMD_MASK=$(printf '0x%x' $(( (1 << (NW + 1)) - 2 )))   # cores 1..N
}
fwd_cpu_list() { local IFS=,; echo "${FWD_CPUS[*]}"; }
# Pair i of the generators: its network, MACs (side 1 sends, side 2 sinks)
# and port ids; pair 0's are the one pair's of a run without --workers.
pair_net() { if [ "$1" = 0 ]; then echo bench; else echo "bench$1"; fi; }
pair_mac() { printf '02:00:00:00:%02x:%02x' "$1" "$2"; }
pair_uuid() { printf '6b1e0d3c-0000-4000-8000-%012x' $(( $1 * 16 + $2 )); }
MAC1=02:00:00:00:00:01 MAC2=02:00:00:00:00:02
PORT1_UUID=6b1e0d3c-0000-4000-8000-000000000001
PORT2_UUID=6b1e0d3c-0000-4000-8000-000000000002
SUBPORT_UUID=6b1e0d3c-0000-4000-8000-000000000003   # l2_trunk: port 1's subport
TRUNK_VLAN=42   # l2_trunk: the subport's VLAN on port 1
SG_ID=6b1e0d3c-0000-4000-8000-0000000005e0   # vlan_sg: the ports' security group
# vlan_sg_new: strait-gen's largest flow count; at a few Mpps a rep's frames
# (warm-up included) stay below it, so every frame is a new connection
NEW_FLOWS=16777216
# vxlan/vxlan_decap: the switch's VTEP (straitd's [vtep], OVS's br-phy address)
# and the remote one the generator plays
VNI=5001 VTEP_LOCAL=10.99.0.1 VTEP_REMOTE=10.99.0.2
NEXT_HOP_MAC=02:00:00:00:00:fe   # static: no ARP on the bench's underlay (OVS: tnl/arp/set)
PHYS_VLAN=100   # vlan_phys: the provider network's VLAN on the sink's trunk
PY=/usr/bin/python3
GEN=$BUILD/bench/strait-gen
CALIB=$BUILD/bench/strait-calib
STRAITD=$BUILD/control/straitd
STRAITCTL=$BUILD/control/straitctl/straitctl
TESTPMD=$(command -v dpdk-testpmd || true)
PFX=strait-bench   # DPDK --file-prefix base: $PFX-gen, $PFX-ceiling, $PFX-strait
T_START=$(date +%s)
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-$BUILD/bench-results}

log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "bench: $*" >&2; exit 1; }

# ------------------------------------------------------------- prereqs ----
[ -x $PY ] || die "$PY not found (Debian python3 is needed for the statistics)"
if [ ! -x "$GEN" ] || [ ! -x "$CALIB" ]; then
    log "building strait-gen and strait-calib in $BUILD"
    cmake --build "$BUILD" --target strait-gen strait-calib >&2 || die "cannot build strait-gen/strait-calib"
fi
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)

exec 9> /tmp/strait-bench.lock
flock -n 9 || die "another bench/run.sh is running (lock /tmp/strait-bench.lock)"

W=$(mktemp -d /tmp/strait-bench.XXXXXX) || die "mktemp failed"
RES=$W/results.tsv      # switch scenario size flows rep status mpps txfail samples note
CTL_RES=$W/control.tsv  # switch scenario flows rep status values_ms(,) note
: > "$RES"; : > "$CTL_RES"
GENPID= SW_PID= ADDED_HUGE=0

TORN_DOWN=0
teardown() {
    [ $TORN_DOWN = 1 ] && return 0
    TORN_DOWN=1
    local p
    for p in $GENPID $CHURN_PID; do stop_pid "$p" 5; done   # one generator per pair
    [ -n "$SW_PID" ] && stop_pid "$SW_PID" 5
    GENPID= SW_PID=
    local sw
    for sw in "${SW_L[@]}" "${CTL_SW_L[@]}"; do
        declare -F sw_${sw}_cleanup > /dev/null && sw_${sw}_cleanup
    done
    rm -rf /var/run/dpdk/$PFX-gen* /var/run/dpdk/$PFX-ceiling /var/run/dpdk/$PFX-strait 2>/dev/null
    give_back_hugepages
    if [ -d "$W" ]; then
        mkdir -p "$OUT/$STAMP-logs" && cp -r "$W"/*.log "$W"/*.log.gz "$W"/*.tsv "$W"/*.txt "$W"/ctl-strait-* "$OUT/$STAMP-logs/" 2>/dev/null
        if [ $KEEP = 1 ]; then log "kept $W"; else rm -rf "$W"; fi
    fi
    return 0
}
# Take back only the pages this run added (others may have added some too).
give_back_hugepages() {
    [ "$ADDED_HUGE" -gt 0 ] || return 0
    local cur; cur=$(cat /proc/sys/vm/nr_hugepages)
    local n=$(( cur > ADDED_HUGE ? cur - ADDED_HUGE : 0 ))
    echo $n > /proc/sys/vm/nr_hugepages 2>/dev/null && log "vm.nr_hugepages back to $n"
    ADDED_HUGE=0
}
cleanup() { local rc=$?; trap - EXIT INT TERM; teardown; exit $rc; }
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# stop_pid PID TIMEOUT_S: SIGTERM, then SIGKILL after the timeout.
stop_pid() {
    local pid=$1 t=$(( $2 * 10 ))
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    kill -TERM "$pid" 2>/dev/null
    while [ $t -gt 0 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; t=$((t - 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid did not stop after SIGTERM: SIGKILL"
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
    return 0
}

# ---------------------------------------------------------- the switches ---
# ceiling: stock dpdk-testpmd, io forwarding between two net_vhost ports.
sw_ceiling_desc() { echo "dpdk-testpmd --forward-mode=io (fwd lcore on core $SW_CPU, main lcore on core $GEN_CPU; --workers N: N fwd lcores on cores 1..N, pair i's two ports on lcore i)"; }
sw_ceiling_check() { [ -n "$TESTPMD" ] || { echo "dpdk-testpmd not found (apt install dpdk)"; return 1; }; }
sw_ceiling_start() { # scenario sock1 sock2 log (--workers: every pair's sockets in SOCKS)
    # Ports in pair order, paired topology: testpmd gives forwarding lcore i
    # streams 2i and 2i+1, pair i's two ports.
    local lcores="0@$GEN_CPU" vdevs=() i
    for ((i = 0; i < NW; i++)); do lcores+=",$((i + 1))@${FWD_CPUS[i]}"; done
    for ((i = 0; i < 2 * NW; i++)); do vdevs+=(--vdev "net_vhost$i,iface=${SOCKS[i]},client=1,queues=1"); done
    taskset -c $GEN_CPU "$TESTPMD" --lcores "$lcores" --main-lcore 0 \
        --file-prefix $PFX-ceiling $SW_MEM --no-pci --no-telemetry --log-level=lib.eal:error \
        "${vdevs[@]}" -- \
        --forward-mode=io --port-topology=paired --nb-cores=$NW --rxq=1 --txq=1 \
        --total-num-mbufs=$((16384 * NW)) --stats-period=1 > "$4" 2>&1 < /dev/null &
    SW_PID=$!
}
sw_ceiling_stop() {
    stop_pid "$SW_PID" 10; SW_PID=
    # testpmd's own count of packets it could not hand to the sink's ring
    sed -n '/Accumulated forward statistics/,/+++/s/.*TX-dropped: *\([0-9]*\).*/\1/p' "$CUR_SWLOG" |
        awk '{n += $1} END {if (NR) print "tx_dropped=" n}' > "$W/metrics.txt"
}

# strait: straitd with one worker on core 1, two ports on a local network.
STRAIT_DIR=$W/strait
sw_strait_desc() { echo "straitd (worker lcore 1 on core $SW_CPU; main/control/API threads on core $GEN_CPU; --workers N: workers on cores 1..N, rx queues rebalanced by load in the warm-up)"; }
sw_strait_check() {
    [ -x "$STRAITD" ] || { echo "straitd not built ($STRAITD missing)"; return 1; }
    [ -x "$STRAITCTL" ] || { echo "straitctl not built ($STRAITCTL missing)"; return 1; }
}
ctl() { timeout 30 "$STRAITCTL" -s "$STRAIT_DIR/api.sock" "$@"; }
# The generator's ports are VMs: Strait attaches them as vhost-user ports
# of its own (rte_vhost, client of the generator's server socket), as it
# attaches QEMU's. STRAIT_ATTACH=ethdev binds them through the DPDK vhost
# PMD instead (the attachment testpmd uses), to measure that wrapper's cost.
vm_port() { # devname sock -> straitctl port bind arguments
    if [ "${STRAIT_ATTACH:-vhost}" = ethdev ]; then echo "--ethdev $1,iface=$2,client=1,queues=1"
    else echo "--vhost $2"; fi
}
sw_strait_start() { # scenario sock1 sock2 log
    local log=$4 t
    rm -rf "$STRAIT_DIR"; mkdir -p "$STRAIT_DIR/state"
    cat > "$STRAIT_DIR/straitd.toml" <<EOF
state_dir = "$STRAIT_DIR/state"
api_socket = "$STRAIT_DIR/api.sock"

[datapath]
workers = [$(fwd_cpu_list)]
$(case $1 in vlan_phys*) echo "mac_aging_s = 1" ;; esac)

[libvirt]
enabled = false
EOF
    # vxlan/vxlan_decap: the underlay is a physnet whose NIC is one of the
    # generator's ports (vxlan: the sink, vxlan_decap: the generator). The
    # underlay MTU is 1550 so that the network's MTU (underlay - 50) is
    # 1500: the 1518-byte frames pass, as in l2.
    case "$1" in
    vlan_phys|vlan_phys_churn)
        printf '\n[physnets.phys]\ndevice = "net_vhost1,iface=%s,client=1,queues=1"\n' "$3" >> "$STRAIT_DIR/straitd.toml"
        ;;
    vxlan|vxlan_decap)
        local dev=net_vhost1 sock=$3
        [ "$1" = vxlan_decap ] && { dev=net_vhost0; sock=$2; }
        cat >> "$STRAIT_DIR/straitd.toml" <<EOF

[physnets.underlay]
device = "$dev,iface=$sock,client=1,queues=1"

[vtep]
local_ip = "$VTEP_LOCAL"
physnet = "underlay"
next_hop_mac = "$NEXT_HOP_MAC"
underlay_mtu = 1550
EOF
        ;;
    esac
    # vlan_sg_new: every frame opens a connection; the table holds all of them
    [ "$1" = vlan_sg_new ] && printf '\n[conntrack]\ncapacity = %s\n' $NEW_FLOWS >> "$STRAIT_DIR/straitd.toml"
    taskset -c $GEN_CPU "$STRAITD" --config "$STRAIT_DIR/straitd.toml" -- \
        -l "$GEN_CPU,$(fwd_cpu_list)" --main-lcore $GEN_CPU --file-prefix $PFX-strait $SW_MEM --no-pci \
        >> "$log" 2>&1 < /dev/null &   # append: straitctl's output goes to the same log
    SW_PID=$!
    for t in $(seq 300); do
        [ -S "$STRAIT_DIR/api.sock" ] && break
        kill -0 $SW_PID 2>/dev/null || { echo "straitd exited during start-up:"; tail -15 "$log"; return 1; }
        sleep 0.1
    done
    [ -S "$STRAIT_DIR/api.sock" ] || { echo "straitd: no API socket after 30 s"; tail -15 "$log"; return 1; }
    case "$1" in
    l2|vlan)
        # A local network with both ports bound: Strait gives each network
        # a local VLAN on the host, so this is already neutron's local-VLAN
        # L2 forwarding (OVS: br-int NORMAL with two tag=1 access ports).
        # --workers: a network per pair; every pair's sending port first.
        { for_pairs ctl network create @net --type local &&
          for_pairs ctl port bind @uuid1 --network @net --mac @mac1 @vm1 &&
          for_pairs ctl port bind @uuid2 --network @net --mac @mac2 @vm2
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        ;;
    l2_trunk)
        # Issue 25's trunk (Strait only): port 1 is a trunk's parent on
        # network bench, its subport (VLAN $TRUNK_VLAN, MAC1) and port 2 on
        # network bench-sub. The generator's frames are tagged $TRUNK_VLAN:
        # each one goes through the worker's trunk step, untagged, to port 2.
        # Against l2 in the same run: what a trunk costs a frame.
        { ctl network create bench --type local &&
          ctl network create bench-sub --type local &&
          ctl port bind $PORT1_UUID --network bench --mac $MAC1 $(vm_port net_vhost0 "$2") &&
          ctl port bind $SUBPORT_UUID --network bench-sub --mac $MAC1 \
              --subport-of $PORT1_UUID --segmentation-id $TRUNK_VLAN &&
          ctl port bind $PORT2_UUID --network bench-sub --mac $MAC2 $(vm_port net_vhost1 "$3")
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        ;;
    l2_qos)
        # Issue 25's QoS (Strait only): l2 with neutron's three rule types on
        # both ports, limits far above any rate here (every frame charges
        # both meters of each direction it takes; none is dropped) and DSCP
        # 26 on what port 1 sends. Against l2 in the same run: what QoS
        # costs a frame.
        { ctl network create bench --type local &&
          ctl port bind $PORT1_UUID --network bench --mac $MAC1 $(vm_port net_vhost0 "$2") \
              --bandwidth-limit egress:400000000 --packet-rate-limit egress:1000000 --dscp-mark 26 &&
          ctl port bind $PORT2_UUID --network bench --mac $MAC2 $(vm_port net_vhost1 "$3") \
              --bandwidth-limit ingress:400000000 --packet-rate-limit ingress:1000000
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        ;;
    vlan_sg|vlan_sg_new|vlan_sg_churn)
        # The same local network, plus port security and one security group
        # on both ports, the policy ovs.sh installs as neutron's openvswitch
        # firewall (ovs_fw_flows): egress any IPv4; ingress UDP to 5001 from
        # the peer's /16. The generator's frames (MAC1 -> MAC2, IPv4 src
        # 10.0.0.0 + ((flow + 1) & 0xffff), dst 10.1.0.1:5001) pass the
        # anti-spoofing of port 1 through its allowed address pair 10.0.0.0/16
        # (OVS: nw_src=10.0.0.0/16 in table 71); port 2 gets 10.1.0.0/16 the
        # same way. Every frame is checked against port 1's egress and port
        # 2's ingress rules through conntrack (zone of the network). The
        # --learn frames (ethertype 0x88b5 from port 2) are dropped as
        # ethertype_denied, as OVS drops them in table 71 (-> 93).
        { for_pairs ctl network create @net --type local &&
          ctl security-group create $SG_ID --name bench-vlan-sg &&
          ctl security-group rule create $SG_ID --direction egress --ethertype IPv4 &&
          ctl security-group rule create $SG_ID --direction ingress --ethertype IPv4 --protocol udp \
              --port-range-min 5001 --port-range-max 5001 --remote-ip-prefix 10.1.0.0/16 &&
          ctl security-group rule create $SG_ID --direction ingress --ethertype IPv4 --protocol udp \
              --port-range-min 5001 --port-range-max 5001 --remote-ip-prefix 10.0.0.0/16 &&
          for_pairs ctl port bind @uuid1 --network @net --mac @mac1 --ip 10.0.0.1 \
              --allowed-address-pair 10.0.0.0/16 --security-group $SG_ID --port-security @vm1 &&
          for_pairs ctl port bind @uuid2 --network @net --mac @mac2 --ip 10.1.0.1 \
              --allowed-address-pair 10.1.0.0/16 --security-group $SG_ID --port-security @vm2 &&
          echo "=== straitctl -o json security-group show $SG_ID" &&
          ctl -o json security-group show $SG_ID
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        if [ "$1" = vlan_sg_churn ]; then
            ctl security-group create $CHURN_SG_ID --name bench-churn >> "$log" 2>&1 ||
                { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
            : > "$W/churn.txt"
            strait_churn >> "$log" 2>&1 &
            CHURN_PID=$!
        fi
        ;;
    vlan_phys|vlan_phys_churn)
        # Port 1 (the generator) is a VM with vlan_sg's group (egress any
        # IPv4, through conntrack) on VLAN $PHYS_VLAN of physnet "phys",
        # whose NIC is the sink's socket: every frame leaves tagged. The
        # sink side's learning frames (tagged) teach the switch MAC2, and
        # with _churn 1000 more MACs a second, each learned MAC a change of
        # the learned table the workers see.
        { ctl network create bench --type vlan --physnet phys --segmentation-id $PHYS_VLAN &&
          ctl security-group create $SG_ID --name bench-vlan-phys &&
          ctl security-group rule create $SG_ID --direction egress --ethertype IPv4 &&
          ctl port bind $PORT1_UUID --network bench --mac $MAC1 --ip 10.0.0.1 \
              --allowed-address-pair 10.0.0.0/16 --security-group $SG_ID --port-security \
              $(vm_port net_vhost0 "$2")
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        ;;
    vlan_sg_default)
        # Issue 5's "typical policy" (Strait only: no OVS counterpart here):
        # neutron's default group (egress any; ingress from members of the
        # group itself) plus 20 TCP/UDP port rules, on both ports. The
        # generator's UDP to 5001 is allowed by the remote-group rule: port 1's
        # allowed pair 10.0.0.0/16 is a member address of the group.
        { ctl network create bench --type local &&
          ctl call security_group.create "$(sg_default_json)" &&
          ctl port bind $PORT1_UUID --network bench --mac $MAC1 --ip 10.0.0.1 \
              --allowed-address-pair 10.0.0.0/16 --security-group $SG_ID \
              $(vm_port net_vhost0 "$2") &&
          ctl port bind $PORT2_UUID --network bench --mac $MAC2 --ip 10.1.0.1 \
              --allowed-address-pair 10.1.0.0/16 --security-group $SG_ID \
              $(vm_port net_vhost1 "$3") &&
          echo "=== straitctl -o json security-group show $SG_ID" &&
          ctl -o json security-group show $SG_ID
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        ;;
    vxlan)
        # Encap: port 1 (the generator's tx) is a VM on a vxlan network; the
        # generator's destination MAC is, by l2population, behind a remote
        # VTEP, so every frame leaves on the underlay (the sink) in
        # Ethernet/IPv4/UDP/VXLAN to $VTEP_REMOTE via the static next hop.
        { ctl network create bench --type vxlan --segmentation-id $VNI &&
          ctl port bind $PORT1_UUID --network bench --mac $MAC1 $(vm_port net_vhost0 "$2") &&
          ctl tunnel fdb add bench $MAC2 $VTEP_REMOTE &&
          echo "=== straitctl -o json tunnel show" && ctl -o json tunnel show
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        ;;
    vxlan_decap)
        # Decap: the generator plays the remote VTEP on the underlay (port
        # 1, --vxlan $VNI: the same frames as l2 inside 50 bytes of outer
        # headers to $VTEP_LOCAL:4789); straitd decapsulates and delivers the
        # inner frame to the VM on port 2 (MAC2), the sink.
        { ctl network create bench --type vxlan --segmentation-id $VNI &&
          ctl port bind $PORT2_UUID --network bench --mac $MAC2 $(vm_port net_vhost1 "$3") &&
          ctl tunnel fdb add bench $MAC1 $VTEP_REMOTE &&
          echo "=== straitctl -o json tunnel show" && ctl -o json tunnel show
        } >> "$log" 2>&1 || { echo "straitctl setup failed:"; tail -15 "$log"; return 1; }
        ;;
    *) echo "strait: unknown scenario $1"; return 1 ;;
    esac
    return 0
}
# for_pairs CMD ARGS...: CMD once per generator/sink pair, with @net, @uuid1,
# @uuid2, @mac1, @mac2, @vm1 and @vm2 (the port's attachment: vm_port, one
# word each) in ARGS replaced by the pair's.
for_pairs() {
    local i a args
    for ((i = 0; i < NW; i++)); do
        args=()
        for a in "$@"; do
            case $a in
            @net) args+=("$(pair_net $i)") ;;
            @uuid[12]) args+=("$(pair_uuid $i ${a#@uuid})") ;;
            @mac[12]) args+=("$(pair_mac $i ${a#@mac})") ;;
            @vm[12]) local side=${a#@vm}
                     # shellcheck disable=SC2046
                     args+=($(vm_port net_vhost$((2 * i + side - 1)) "${SOCKS[2 * i + side - 1]}")) ;;
            *) args+=("$a") ;;
            esac
        done
        "${args[@]}" || return 1
    done
}
# --workers: the rx queues spread by the load measured on them, once every
# pair's traffic runs (what an operator, or rebalance_interval_s, does).
sw_strait_traffic_runs() {
    echo "=== straitctl workers rebalance"; ctl workers rebalance
    sleep 0.5   # the moves are live after two grace periods: then where each queue is
    echo "=== rx queues by worker (dp_port:queue) after the rebalance"
    ctl -o json show | $PY -c 'import json, sys
for w in json.load(sys.stdin)["workers"]:
    print("worker %s: %s" % (w["id"], " ".join("%s:%s" % (q["port"], q["queue"]) for q in w["rx_queues"])))'
}
sw_strait_supports() { case "$1" in l2|l2_trunk|l2_qos|vlan|vlan_sg|vlan_sg_new|vlan_sg_churn|vlan_sg_default|vlan_phys|vlan_phys_churn|vxlan|vxlan_decap) return 0 ;; *) return 1 ;; esac; }
# vlan_sg_churn: a rule of a group no port is in, created and deleted in
# turn, one change a second, for as long as the rep runs (sw_strait_stop
# ends it); each change that took effect is a line of $W/churn.txt.
CHURN_SG_ID=6b1e0d3c-0000-4000-8000-0000000c5e00 CHURN_RULE_ID=6b1e0d3c-0000-4000-8000-0000000c5e01
CHURN_PID=
strait_churn() {
    local n=0
    while sleep 1; do
        if [ $((n % 2)) = 0 ]; then
            ctl security-group rule create $CHURN_SG_ID --id $CHURN_RULE_ID --direction ingress \
                --ethertype IPv4 --protocol tcp --port-range-min 1000 --port-range-max 1000
        else
            ctl security-group rule delete $CHURN_RULE_ID
        fi > /dev/null && echo "$n" >> "$W/churn.txt"
        n=$((n + 1))
    done
}
# vlan_sg_default's group: neutron's default group + 20 TCP/UDP port rules
sg_default_json() {
    # explicit rule ids (bench-rN), as neutron's agents send them
    local r='{"id":"bench-r0","direction":"egress","ethertype":"IPv4"}'
    r+=',{"id":"bench-r1","direction":"egress","ethertype":"IPv6"}'
    r+=",{\"id\":\"bench-r2\",\"direction\":\"ingress\",\"ethertype\":\"IPv4\",\"remote_group_id\":\"$SG_ID\"}"
    r+=",{\"id\":\"bench-r3\",\"direction\":\"ingress\",\"ethertype\":\"IPv6\",\"remote_group_id\":\"$SG_ID\"}"
    local p n=4
    for p in tcp:22 tcp:80 tcp:443 tcp:3306 tcp:5432 tcp:6379 tcp:8080 tcp:8443 tcp:9000-9100 tcp:27017 \
             udp:53 udp:123 udp:161 udp:500 udp:514 udp:1194 udp:4500 udp:5060 udp:6000-6100 udp:8472; do
        local proto=${p%%:*} range=${p#*:}
        local lo=${range%-*} hi=${range#*-}
        r+=",{\"id\":\"bench-r$n\",\"direction\":\"ingress\",\"ethertype\":\"IPv4\",\"protocol\":\"$proto\""
        r+=",\"port_range_min\":$lo,\"port_range_max\":$hi,\"remote_ip_prefix\":\"0.0.0.0/0\"}"
        n=$((n + 1))
    done
    echo "{\"id\":\"$SG_ID\",\"name\":\"bench-default\",\"rules\":[$r]}"
}
sw_strait_stop() {
    local churn=
    if [ -n "$CHURN_PID" ]; then
        stop_pid "$CHURN_PID" 5; CHURN_PID=
        churn="rule_changes=$(grep -c . "$W/churn.txt")"
    fi
    # keep what the switch says about the rep (drops, cycles) in its log
    if kill -0 "$SW_PID" 2>/dev/null; then
        ctl -o json stats > "$W/strait-stats.json" 2>&1
        { echo "=== straitctl -o json stats"; cat "$W/strait-stats.json"
          echo "=== straitctl -o json show"; ctl -o json show; } >> "$CUR_SWLOG" 2>&1
        # whole-run (incl. warm-up) cycles per packet of the worker, drops
        $PY - "$W/strait-stats.json" > "$W/metrics.txt" 2>/dev/null <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
w = s.get("workers", [])
pk = sum(x.get("packets", 0) for x in w)
busy = sum(x.get("busy_cycles", 0) for x in w)
out = [f"cyc_per_pkt={busy / pk:.0f}" if pk else "cyc_per_pkt=NA", f"packets={pk}"]
# flow-cache misses over the run (warm-up included), and those on entries a
# learned MAC made stale: what churn costs, without the machine's noise
out += [f"{k}={sum(x.get(k, 0) for x in w)}" for k in ("cache_misses", "cache_stale")
        if any(k in x for x in w)]
if len(w) > 1:  # --workers: how many carried at least half the busiest one's frames
    top = max(x.get("packets", 0) for x in w)
    out.append(f"workers_busy={sum(1 for x in w if top and x.get('packets', 0) >= top / 2)}/{len(w)}")
out += [f"drop_{k}={v}" for k, v in sorted(s.get("drops", {}).items())]
ct = s.get("conntrack")   # vlan_sg: the connection table at the end of the rep
if isinstance(ct, dict) and any(ct.get(k) for k in ("entries", "created", "refused_full", "invalid")):
    out += [f"ct_{k}={ct[k]}" for k in ("entries", "created", "refused_full", "invalid")
            if isinstance(ct.get(k), int)]
    # connections the worker opened per second of its busy time (vlan_sg_new:
    # every frame is a new connection)
    if busy and s.get("tsc_hz") and isinstance(ct.get("created"), int):
        out.append(f"ct_new_per_busy_s={ct['created'] / (busy / s['tsc_hz']):.0f}")
print(" ".join(out))
PYEOF
        [ -n "$churn" ] && sed -i "1s/\$/ $churn/" "$W/metrics.txt"
    fi
    stop_pid "$SW_PID" 10; SW_PID=
}

# strait_meson: the same switch, straitd built against meson-dpdk/'s DPDK.
sw_strait_meson_desc() { echo "$STRAITD_MESON (meson-dpdk/'s DPDK unless STRAITD_MESON names another build), placed as strait"; }
sw_strait_meson_check() {
    [ -x "$STRAITD_MESON" ] || { echo "run meson-dpdk/build.sh first ($STRAITD_MESON missing)"; return 1; }
    sw_strait_check
}
sw_strait_meson_start() { local STRAITD=$STRAITD_MESON; sw_strait_start "$@"; }
sw_strait_meson_stop() { sw_strait_stop; }
sw_strait_meson_supports() { sw_strait_supports "$1"; }

# ------------------------------------------------------------ scenarios ---
scen_gen_args() { # scenario -> extra strait-gen options
    case "$1" in
    # plain L2 between two ports, MAC2 announced from port 1; untagged frames
    # as a VM sends them (the switch's access ports do the local VLAN)
    l2|l2_qos|vlan|vlan_sg|vlan_sg_new|vlan_sg_churn|vlan_sg_default) echo "--learn" ;;
    # the VM's frames on its trunk's subport: tagged; port 2's MAC is bound
    # (no learning frames, which would be tagged too)
    l2_trunk) echo "--vlan $TRUNK_VLAN" ;;
    # the sink is a physnet trunk: tagged learning frames; _churn: every
    # other one from a new MAC, 1000 a second
    vlan_phys) echo "--learn --learn-vlan $PHYS_VLAN --learn-pps 2000" ;;
    vlan_phys_churn) echo "--learn --learn-vlan $PHYS_VLAN --learn-pps 2000 --learn-macs 16777216" ;;
    # the remote MAC is known through the FDB (l2population): no learning
    vxlan) echo "" ;;
    # the generator is the remote VTEP: the l2 frames inside VXLAN
    vxlan_decap) echo "--vxlan $VNI --vtep-src $VTEP_REMOTE --vtep-dst $VTEP_LOCAL --outer-src-mac $NEXT_HOP_MAC" ;;
    *) return 1 ;;
    esac
}

# Open vSwitch with DPDK: sw_ovs_* (and its scenarios) live in bench/ovs.sh.
# shellcheck source=bench/ovs.sh
. "$HERE/ovs.sh"

# One line on how each switch's control-plane points are taken (header).
ctl_desc() {
    case $1 in
    strait) echo "bench/lifecycle_bench.py per rep (fresh straitd --no-huge, worker on core $SW_CPU, the rest on core $GEN_CPU): control_N_ports = one bulk port.bind of N ports with 3 groups (remote-group self-reference), reply -> all in the datapath; rule_change = security_group_rule.create of port 2's ingress rule (N ports bound) -> first frame at strait-gen's sink (gap-watch); the reply times of rules in the N ports' group in the note" ;;
    ovs) echo "ovs.sh ovs_ctl_rep per rep (fresh ovs-vswitchd, br-int + vlan_sg pipeline): control_N_ports = one ovs-vsctl transaction (N dpdkvhostuserclient ports, tag 1) + one ovs-ofctl --bundle add-flows (neutron openvswitch-firewall flows, same groups/IPs) until dump-aggregate counts them; rule_change = ovs-ofctl --bundle add-flow of port 2's ingress rule -> first frame at strait-gen's sink (gap-watch)" ;;
    esac
}

# ------------------------------------------------------------ measuring ---
# Thread placement of PID: "name:cpus-allowed" for each thread.
threads_of() {
    local t out=
    for t in /proc/$1/task/*; do
        out+="$(cat $t/comm 2>/dev/null):$(awk '/^Cpus_allowed_list/{print $2}' $t/status 2>/dev/null) "
    done
    echo "$out"
}

# run_one SWITCH SCENARIO SIZE FLOWS REP (NW generator/sink pairs)
run_one() {
    local sw=$1 sc=$2 size=$3 flows=$4 rep=$5
    local tag="$sw-$sc-$size-$flows-$rep" status=ok note= i t
    [ $WORKERS_MODE = 1 ] && tag+="-w$NW"
    local glog=$W/gen-$tag.log glogs=() what="$sc size=$size flows=$flows rep=$rep"
    [ $WORKERS_MODE = 1 ] && what+=" workers=$NW"
    CUR_SWLOG=$W/sw-$tag.log
    SOCKS=()
    for ((i = 1; i <= 2 * NW; i++)); do SOCKS+=("$W/vhu$i.sock"); done
    rm -f "${SOCKS[@]}"
    # strait-gen is the vhost-user server: it creates the sockets and blocks
    # in its EAL init until the switch (client) connects to both. One per
    # pair (pair 0's log is gen-TAG.log, pair i's gen-TAG-pI.log).
    GENPID=
    for ((i = 0; i < NW; i++)); do
        local cpu=${GEN_CPUS[i % ${#GEN_CPUS[@]}]} pfx=$PFX-gen g=$glog
        [ $i -gt 0 ] && pfx=$PFX-gen$i g=${glog%.log}-p$i.log
        glogs+=("$g")
        taskset -c "$cpu" "$GEN" --lcores "0@$cpu" --file-prefix "$pfx" $GEN_MEM \
            --no-pci --no-telemetry --log-level=lib.eal:error \
            --vdev "virtio_user0,path=${SOCKS[2 * i]},server=1,queue_size=1024" \
            --vdev "virtio_user1,path=${SOCKS[2 * i + 1]},server=1,queue_size=1024" -- \
            --size "$size" --flows "$flows" --warmup "$WARM" --duration "$DUR" \
            --src-mac "$(pair_mac $i 1)" --dst-mac "$(pair_mac $i 2)" --link-timeout 30 \
            $(scen_gen_args "$sc") > "$g" 2>&1 < /dev/null &
        GENPID+="$! "
    done
    local first=${GENPID%% *}
    gens_alive() { local p; for p in $GENPID; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
    all_sampled() { local g; for g in "$@"; do grep -q '^t=' "$g" || return 1; done; }
    for ((i = 0; i < 2 * NW; i += 2)); do
        for t in $(seq 100); do [ -S "${SOCKS[i]}" ] && break; gens_alive || break; sleep 0.1; done
        [ -S "${SOCKS[i]}" ] || { status=gen-failed; note="strait-gen did not create ${SOCKS[i]}"; break; }
    done
    if [ $status = ok ] && ! sw_${sw}_start "$sc" "${SOCKS[0]}" "${SOCKS[1]}" "$CUR_SWLOG" > "$W/start-err.txt"; then
        status=switch-failed; note=$(cat "$W/start-err.txt")
    fi
    if [ $status = ok ]; then
        # the generators end on their own; watch the switch and a deadline
        local deadline=$(( $(date +%s) + WARM + DUR + 60 )) placed=0 balanced=0 key=$sw
        [ $WORKERS_MODE = 1 ] && key="$sw workers=$NW"
        while gens_alive; do
            if ! kill -0 "$SW_PID" 2>/dev/null; then
                status=switch-died; note="switch exited during the rep: $(tail -3 "$CUR_SWLOG" | tr '\n' ' ')"; break
            fi
            if [ $placed = 0 ] && grep -q '^t=' "$glog"; then
                placed=1
                [ -z "${PLACEMENT[$key]:-}" ] &&
                    PLACEMENT[$key]="$key: $(threads_of "$SW_PID"); strait-gen: $(threads_of "$first")"
            fi
            # --workers: every pair's traffic runs (a 1-s sample each): spread
            # the rx queues by their load before the measurement starts
            if [ $WORKERS_MODE = 1 ] && [ $balanced = 0 ] && all_sampled "${glogs[@]}"; then
                balanced=1
                declare -F sw_${sw}_traffic_runs > /dev/null && sw_${sw}_traffic_runs >> "$CUR_SWLOG" 2>&1
            fi
            [ "$(date +%s)" -gt $deadline ] && { status=timeout; note="generator still running at the deadline"; break; }
            sleep 0.2
        done
    fi
    for t in $GENPID; do stop_pid "$t" 5; done
    GENPID=
    rm -f "$W/metrics.txt"
    [ -n "$SW_PID" ] && sw_${sw}_stop
    [ $status = ok ] && [ -s "$W/metrics.txt" ] && note=$(head -1 "$W/metrics.txt")
    # The pairs' sum: Mpps, txfail and each 1-s sample; none if a pair has none.
    local mpps txf samples
    read -r mpps txf samples < <($PY - "${glogs[@]}" <<'PYEOF'
import re, sys
mpps, txf, samples = 0.0, 0.0, None
for path in sys.argv[1:]:
    text = open(path, errors="replace").read()
    m = re.search(r"^RESULT rx_mpps=([0-9.]+).*?txfail_mpps=([0-9.]+)", text, re.M)
    if not m:
        print("NA NA"); sys.exit()
    mpps += float(m.group(1)); txf += float(m.group(2))
    s = [float(x) for x in re.findall(r"^t=\S+ rx_mpps=([0-9.]+)(?!.*warmup)", text, re.M)]
    samples = s if samples is None else [a + b for a, b in zip(samples, s)]
print(f"{mpps:.3f} {txf:.3f} {','.join(f'{x:.3f}' for x in samples)}")
PYEOF
)
    [ "$mpps" = NA ] && mpps= txf=
    if [ $status = ok ] && [ -z "$mpps" ]; then
        status=no-result; note=$(grep -hE 'strait-gen:|ERR|error' "${glogs[@]}" | tail -3 | tr '\n' ' ')
    elif [ $status = ok ] && grep -q 'nothing arrived at the sink' "${glogs[@]}"; then
        status=no-traffic; note="0 packets at a sink; $(grep -hiE 'fail|error' "${glogs[@]}" "$CUR_SWLOG" | grep -v -- '-FAILED: 0' | tail -3 | tr '\n' ' ')"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sw" "$sc" "$size" "$flows" "$rep" "$status" \
        "${mpps:-NA}" "${txf:-NA}" "${samples:-}" "$(echo "$note" | tr '\t\n' '  ')" "$NW" >> "$RES"
    if [ $status = ok ]; then FAILS[$sw]=0; else FAILS[$sw]=$(( ${FAILS[$sw]:-0} + 1 )); fi
    if [ $status = ok ]; then
        log "$what $sw: rx ${mpps} Mpps (txfail ${txf:-?} Mpps; 1-s: ${samples}) $note"
    else
        log "$what $sw: FAILED ($status) $note"
        log "  generator log tail: $(tail -4 "$glog" | tr '\n' ' ')"
    fi
}

# ----------------------------------------------------------------- main ---
declare -A PLACEMENT FAILS
ACTIVE=()
for sw in "${SW_L[@]}"; do
    declare -F sw_${sw}_start >/dev/null || die "unknown switch '$sw' (known: ceiling ovs strait strait_meson)"
    if why=$(sw_${sw}_check); then ACTIVE+=("$sw"); else
        log "SKIPPING $sw: $why"
        printf '%s\t-\t-\t-\t-\tunavailable\tNA\tNA\t\t%s\n' "$sw" "$why" >> "$RES"
    fi
done
# Control-plane switches: Strait (lifecycle_bench.py) and OVS (ovs.sh's
# ovs_ctl_rep). OVS is not installed for them: without it, no OVS points.
CTL_ACTIVE=()
if [ $CONTROL = 1 ]; then
    for sw in "${CTL_SW_L[@]}"; do
        case $sw in
        strait) why=$(sw_strait_check) ;;
        ovs) if ! command -v ovs-vswitchd > /dev/null || [ ! -x "$OVS_VSWITCHD" ]; then
                 why="Open vSwitch with DPDK is not installed ($OVS_VSWITCHD; --switches ovs installs it as root)"
             else why=$(sw_ovs_check); fi ;;
        *) die "unknown control-plane switch '$sw' (known: strait ovs)" ;;
        esac
        if [ -z "$why" ]; then CTL_ACTIVE+=("$sw"); else
            log "SKIPPING $sw in the control-plane points: $why"
            printf '%s\t-\t-\t-\tunavailable\t\t%s\n' "$sw" "$why" >> "$CTL_RES"
        fi
    done
fi
[ ${#ACTIVE[@]} -gt 0 ] || [ ${#CTL_ACTIVE[@]} -gt 0 ] || die "no switch can run"
for sc in "${SCEN_L[@]}"; do scen_gen_args "$sc" >/dev/null || die "unknown scenario '$sc' (known: l2 l2_trunk l2_qos vlan vlan_sg vlan_sg_new vlan_sg_churn vlan_sg_default vlan_phys vlan_phys_churn vxlan vxlan_decap)"; done
for sc in "${SCEN_L[@]}"; do
    for sw in "${ACTIVE[@]}"; do
        declare -F sw_${sw}_supports > /dev/null && ! sw_${sw}_supports "$sc" &&
            log "NOTE: $sw has no '$sc' scenario (yet): not run there"
    done
done

# ---------------------------------------------------------- memory mode ---
GEN_PAGES=128 SW_PAGES=256   # 2 MB pages: generator -m 256, switch -m 512
MAXW=1   # --workers: as many generators at most
for v in "${WORKERS_L[@]}"; do [ "$v" -gt $MAXW ] && [ $((2 * v + 1)) -le "$NPROC" ] && MAXW=$v; done
GEN_PAGES=$((GEN_PAGES * MAXW))
MEM_ASKED=$MEM
if [ $MEM = auto ]; then
    free=$(awk '/HugePages_Free/{print $2}' /proc/meminfo)
    if [ "$(id -u)" = 0 ] || [ "${free:-0}" -ge $((GEN_PAGES + SW_PAGES)) ]; then MEM=huge; else MEM=nohuge; fi
fi
if [ $MEM = huge ]; then
    free=$(awk '/HugePages_Free/{print $2}' /proc/meminfo)
    need=$((GEN_PAGES + SW_PAGES + 32))
    if [ "${free:-0}" -lt $need ]; then
        [ "$(id -u)" = 0 ] || die "need $need free 2 MB hugepages (have ${free:-0}); run as root or use --no-huge"
        orig=$(cat /proc/sys/vm/nr_hugepages)
        echo $((orig + need - free)) > /proc/sys/vm/nr_hugepages
        ADDED_HUGE=$(( $(cat /proc/sys/vm/nr_hugepages) - orig ))
        free=$(awk '/HugePages_Free/{print $2}' /proc/meminfo)
        log "vm.nr_hugepages $orig -> $(cat /proc/sys/vm/nr_hugepages) (free $free; given back at the end)"
        if [ "$free" -lt $need ]; then
            give_back_hugepages
            [ $MEM_ASKED = huge ] && die "could only get $free free hugepages (need $need); try --no-huge"
            log "WARNING: could only get $free free hugepages (need $need): using --no-huge"
            MEM=nohuge
        fi
    fi
fi
if [ $MEM = huge ]; then
    # --in-memory: memfd-backed hugepages, no hugetlbfs mount or files needed.
    # --single-file-segments: one fd per memseg list, so virtio-user can share
    # all of its memory with the vhost-user backend (max 8 regions).
    GEN_MEM="--in-memory --single-file-segments -m 256"
    SW_MEM="--in-memory -m 512"
else
    # --no-huge is legacy-mem and thus incompatible with --in-memory; EAL
    # backs it with one memfd (single-file segments implied), which
    # virtio-user can share with the vhost-user backend.  --no-shconf keeps
    # the shared config files out of /var/run/dpdk.
    GEN_MEM="--no-huge --no-shconf -m 256"
    SW_MEM="--no-huge --no-shconf -m 512"
fi


# Share of the 2 CPUs that was idle over 1 s: other work on the machine makes
# every number here lower and noisier.
idle_pct() {
    local a b
    a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
    local tot=0 i
    for i in 1 2 3 4 5 6 7 8; do tot=$(( tot + b[i] - a[i] )); done
    echo $(( tot > 0 ? 100 * (b[4] - a[4] + b[5] - a[5]) / tot : 0 ))
}
calib() { taskset -c $GEN_CPU "$CALIB" $GEN_CPU $SW_CPU 2>&1 | tail -1; }
IDLE_START=$(idle_pct)
CALIB_START=$(calib)
npoints=$(( ${#SCEN_L[@]} * ${#SIZE_L[@]} * ${#FLOW_L[@]} ))
[ ${#ACTIVE[@]} -gt 0 ] && log "strait bench: ${ACTIVE[*]}; ${npoints} points x $REPS reps x ${#ACTIVE[@]} switches, ${WARM}+${DUR} s each; memory: $MEM"
log "calibration (start): $CALIB_START; CPUs idle before start: $IDLE_START %"
[ "$IDLE_START" -lt 90 ] && log "WARNING: the machine is busy (only $IDLE_START % idle): numbers will be low and noisy. Busiest: $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -4 | tr -s ' ' | tr '\n' ',')"
# --workers: the whole throughput run once per N, fewest workers first.
if [ $WORKERS_MODE = 1 ]; then
    NW_L=()
    for ((n = 1; n <= 64; n++)); do   # in increasing order, each once
        [[ ",$WORKERS," == *",$n,"* ]] || continue
        if [ $n -gt 1 ] && [ $((2 * n + 1)) -gt "$NPROC" ]; then
            log "SKIPPING workers=$n: it needs $((2 * n + 1)) CPUs (N forwarding, N generators, 1 for the rest); this machine has $NPROC"
            continue
        fi
        NW_L+=("$n")
    done
    [ ${#ACTIVE[@]} -eq 0 ] || [ ${#NW_L[@]} -gt 0 ] || die "--workers: no N fits on $NPROC CPUs"
else
    NW_L=(1)
fi
# Scenarios alternate within each rep too (l2, vxlan, l2, vxlan, ...): a
# scenario's ratio to its baseline (sg_ratios, tunnel_ratios) compares
# reps taken minutes apart at most, not a whole scenario's run apart.
for nw in "${NW_L[@]}"; do
    set_layout "$nw"
    FAILS=()
    [ $WORKERS_MODE = 1 ] && [ ${#ACTIVE[@]} -gt 0 ] &&
        log "workers=$nw: forwarding on cores $(fwd_cpu_list), generators on cores $(IFS=,; echo "${GEN_CPUS[*]}"), the rest on core $GEN_CPU"
    for size in "${SIZE_L[@]}"; do
        for flows in "${FLOW_L[@]}"; do
            for rep in $(seq "$REPS"); do
                # Each rep starts one switch later (ABC, BCA, CAB, ...): no switch
                # always runs first, or always right after the same other one.
                off=$(( ${#ACTIVE[@]} ? (rep - 1) % ${#ACTIVE[@]} : 0 ))
                ORDER=("${ACTIVE[@]:off}" "${ACTIVE[@]:0:off}")
                for sc in "${SCEN_L[@]}"; do
                    # vlan_sg_new: its own flow count (every frame new), once per size
                    local_flows=$flows
                    if [ "$sc" = vlan_sg_new ]; then
                        [ "$flows" = "${FLOW_L[0]}" ] || continue
                        local_flows=$NEW_FLOWS
                    fi
                    for sw in "${ORDER[@]}"; do
                        declare -F sw_${sw}_supports > /dev/null && ! sw_${sw}_supports "$sc" && continue
                        if [ "${FAILS[$sw]:-0}" -ge 2 ]; then
                            printf '%s\t%s\t%s\t%s\t%s\tskipped\tNA\tNA\t\t%s\n' "$sw" "$sc" "$size" "$local_flows" \
                                "$rep" "not run: failed twice in a row before" >> "$RES"
                            continue
                        fi
                        run_one "$sw" "$sc" "$size" "$local_flows" "$rep"
                    done
                done
            done
        done
    done

done
WORKERS_RUN=$(IFS=,; echo "${NW_L[*]}")
set_layout 1   # the control-plane points: one worker, as without --workers

# ------------------------------------------------------- control plane ---
# Strait: one lifecycle_bench.py run per rep (a fresh straitd, --no-huge):
# control_sg's bulk bind of N ports with security groups, then rule_change
# on them. Its JSON is turned into rows of $CTL_RES.
ctl_strait_rep() { # rep
    local rep=$1 d=$W/ctl-strait-$1 json
    mkdir -p "$d"
    taskset -c $GEN_CPU $PY "$HERE/lifecycle_bench.py" "$BUILD" --ports "$CTL_PORTS" \
        --scenarios control_sg,rule_change --control-sg-modes bulk --rule-changes "$CTL_CHANGES" \
        --rule-first-packet --worker $SW_CPU --lock-held --out "$d" > "$d/stdout.txt" 2> "$d/stderr.log"
    json=$(tail -1 "$d/stdout.txt")
    $PY - "$json" "$rep" "$CTL_PORTS" >> "$CTL_RES" 2>> "$d/stderr.log" <<'PYEOF'
import json, sys
path, rep, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    doc = json.load(open(path))
except (OSError, ValueError) as e:
    doc = {"results": [], "failures": [{"scenario": "all", "error": f"no lifecycle JSON ({e})"}]}
why = "; ".join(f"{f['scenario']}: {f['error']}" for f in doc.get("failures", []))
def row(sc, flows, r, metric, extra=""):
    if r and r.get("values_ms"):
        vals = ",".join(f"{v:.3f}" for v in r["values_ms"])
        print(f"strait\t{sc}\t{flows}\t{rep}\tok\t{vals}\tmetric={metric} {extra}".rstrip())
    else:
        print(f"strait\t{sc}\t{flows}\t{rep}\tfailed\t\t{(why or 'no result').replace(chr(9), ' ')[:500]}")
res = doc.get("results", [])
bulk = next((r for r in res if r.get("metric") == "bulk_bind_total_ms"), None)
row("control_1000_ports", n, bulk, "bulk_port.bind_reply_ms",
    f"detect=reply_after_publish+check_dp_port groups={bulk['groups']} rules={bulk['rules']}" if bulk else "")
# rule_change: the create to the first frame through it (as OVS's); without
# it (failed), the create's reply, which comes once it is live in every worker
oth = {r["metric"]: r for r in res if r.get("scenario") == "rule_change"}
metric = next((m for m in ("rule_create_to_first_packet_ms", "rule_create_reply_ms")
               if oth.get(m, {}).get("values_ms")), "rule_create_to_first_packet_ms")
rc = oth.get(metric)
extra = " ".join(f"{m}_p50={r['p50']:.3f}" for m, r in oth.items()
                 if m != metric and r.get("p50") is not None)
if metric == "rule_create_to_first_packet_ms" and rc:
    extra = ("detect=strait-gen_gap-watch(sink_arrival,200us_interval) "
             f"api_reply_ms={','.join(f'{v:.3f}' for v in rc['reply_ms'])} skipped={rc['skipped']} "
             f"ports_bound={rc['ports']} {extra}")
elif rc:
    extra = f"detect=reply_once_live_in_every_worker group_members={rc['group_members']} {extra}"
row("rule_change", 1, rc, metric, extra)
PYEOF
    log "control rep $rep strait: $(awk -F'\t' -v r=$rep '$1=="strait" && $4==r {printf "%s %s %s; ", $2, $5, $6}' "$CTL_RES")"
}
if [ ${#CTL_ACTIVE[@]} -gt 0 ]; then
    log "control plane: ${CTL_ACTIVE[*]}; control_1000_ports (flows = $CTL_PORTS ports) and rule_change ($CTL_CHANGES changes), $CTL_REPS reps, switches alternated"
    for rep in $(seq "$CTL_REPS"); do
        for sw in "${CTL_ACTIVE[@]}"; do
            case $sw in
            strait) ctl_strait_rep "$rep" ;;
            ovs) ovs_ctl_rep "$rep" "$CTL_PORTS" "$CTL_CHANGES" "$CTL_RES" ;;
            esac
        done
    done
fi

IDLE_END=$(idle_pct)
CALIB_END=$(calib)
log "calibration (end): $CALIB_END; CPUs idle after the run: $IDLE_END %"

# ---------------------------------------------------------------- report ---
{
    for sw in "${ACTIVE[@]}"; do echo "desc	$sw	$(sw_${sw}_desc)"; done
    for sw in "${!PLACEMENT[@]}"; do echo "placement	$sw	${PLACEMENT[$sw]}"; done
    for sw in "${CTL_ACTIVE[@]}"; do echo "ctldesc	$sw	$(ctl_desc $sw)"; done
} > "$W/meta.txt"
JSON=$OUT/strait-bench-$STAMP.json
export B_REPS=$REPS B_DUR=$DUR B_WARM=$WARM B_MEM=$MEM B_QUICK=$QUICK B_GEN_CPU=$GEN_CPU B_SW_CPU=$SW_CPU \
    B_WORKERS_MODE=$WORKERS_MODE B_WORKERS="$WORKERS_RUN" B_NPROC=$NPROC \
    B_CALIB_START="$CALIB_START" B_CALIB_END="$CALIB_END" B_IDLE_START=$IDLE_START B_IDLE_END=$IDLE_END B_WALL=$(( $(date +%s) - T_START )) \
    B_TESTPMD="$TESTPMD" B_BUILD="$BUILD" B_LOGS="$OUT/$STAMP-logs" \
    B_CTL_REPS=$CTL_REPS B_CTL_PORTS=$CTL_PORTS B_CTL_CHANGES=$CTL_CHANGES B_THROUGHPUT=$THROUGHPUT
$PY "$HERE/report.py" "$RES" "$W/meta.txt" "$JSON" "$CTL_RES" || die "report failed (raw results: $RES)"
log "logs: $OUT/$STAMP-logs"
teardown
echo "$JSON"
