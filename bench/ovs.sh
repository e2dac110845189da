# Open vSwitch with DPDK as a switch of bench/run.sh (sourced by it; uses its
# W, PFX, GEN_CPU, SW_CPU, MAC1, MAC2, SW_MEM/MEM, CUR_SWLOG, PY, log,
# stop_pid).
#
# Each rep starts a fresh ovsdb-server + ovs-vswitchd (Debian's
# openvswitch-switch-dpdk, the DPDK build of ovs-vswitchd) with its own
# database, run dir and unixctl sockets under $W/ovs, its own DPDK
# --file-prefix ($PFX-ovs), one PMD thread on core $SW_CPU
# (pmd-cpu-mask) and every other thread, ovsdb-server included, on core
# $GEN_CPU. ovs-vswitchd runs in a network namespace of its own (unshare
# --net): the tap devices of its bridges' internal ports live and die with
# the process. The ports are dpdkvhostuserclient: OVS is the vhost-user
# client of strait-gen's virtio-user servers, as straitd and testpmd are.
#
# Scenarios (as the OVS-DPDK anchor, /work/shared/anchors/ovs-dpdk):
#   l2       br0, one OpenFlow rule in_port=1,actions=output:2 (anchor a)
#   vlan     br-int, NORMAL, both ports access ports of local VLAN 1, as
#            neutron's openvswitch agent binds two ports of one network (b)
#   vlan_sg  vlan + the openvswitch firewall driver's conntrack pipeline for
#            one security group (c): two ct() lookups, 3 datapath passes

OVS_DEB_VSWITCHD=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
# STRAIT_BENCH_OVS_VSWITCHD: another ovs-vswitchd build (e.g. one's own)
OVS_VSWITCHD=${STRAIT_BENCH_OVS_VSWITCHD:-$OVS_DEB_VSWITCHD}
OVS_SCHEMA=/usr/share/openvswitch/vswitch.ovsschema
OVS_DIR=$W/ovs
OVS_PFX=$PFX-ovs
OVS_PMD_MASK=$(printf '0x%x' $((1 << SW_CPU)))
OVS_DB_PID=

# Every OVS tool finds its files under $OVS_DIR, never /var/run/openvswitch.
ovs_env() {
    OVS_RUNDIR=$OVS_DIR OVS_LOGDIR=$OVS_DIR OVS_DBDIR=$OVS_DIR OVS_SYSCONFDIR=$OVS_DIR "$@"
}
ovs_vsctl() { ovs_env timeout 30 ovs-vsctl --db=unix:$OVS_DIR/db.sock --timeout=20 "$@"; }
ovs_appctl() { ovs_env timeout 20 ovs-appctl -t $OVS_DIR/ovs-vswitchd.ctl "$@"; }
ovs_ofctl() { # [--OPTION...] CMD BRIDGE ARGS...
    local opts=()
    while [[ $1 == --* ]]; do opts+=("$1"); shift; done
    local cmd=$1 br=$2; shift 2
    ovs_env timeout 30 ovs-ofctl "${opts[@]}" "$cmd" "unix:$OVS_DIR/$br.mgmt" "$@"
}

sw_ovs_desc() {
    echo "$($OVS_VSWITCHD --version 2>/dev/null | tr '\n' ' ')(one PMD: pmd-cpu-mask=$OVS_PMD_MASK = core $SW_CPU;" \
         "main/handler/revalidator/vhost threads and ovsdb-server on core $GEN_CPU; dpdkvhostuserclient ports)"
}

# Installs openvswitch-switch-dpdk on first use (root only), so that
# bootstrap and `make test` do not pay for it.
sw_ovs_check() {
    if [ ! -x $OVS_VSWITCHD ] && [ $OVS_VSWITCHD = $OVS_DEB_VSWITCHD ]; then
        [ "$(id -u)" = 0 ] || { echo "openvswitch-switch-dpdk is not installed (run as root to install it)"; return 1; }
        log "ovs: installing openvswitch-switch-dpdk (apt-get; once)"
        { apt-get install -y --no-install-recommends openvswitch-switch-dpdk ||
          { apt-get update && apt-get install -y --no-install-recommends openvswitch-switch-dpdk; }
        } > "$W/ovs-install.txt" 2>&1 < /dev/null ||
            { echo "apt-get install openvswitch-switch-dpdk failed: $(tail -2 "$W/ovs-install.txt" | tr '\n' ' ')"; return 1; }
    fi
    [ -x $OVS_VSWITCHD ] || { echo "$OVS_VSWITCHD not found"; return 1; }
    # The bench runs $OVS_VSWITCHD by path; the alternative is for people
    # who type ovs-vswitchd (as the anchor set it).
    if [ "$(id -u)" = 0 ] && [ -x $OVS_DEB_VSWITCHD ] && ! ovs-vswitchd --version 2>/dev/null | grep -q DPDK; then
        update-alternatives --set ovs-vswitchd $OVS_DEB_VSWITCHD > /dev/null 2>&1
    fi
    $OVS_VSWITCHD --version 2>/dev/null | grep -q '^DPDK' || { echo "$OVS_VSWITCHD is not built with DPDK"; return 1; }
    local t
    for t in ovsdb-server ovsdb-tool ovs-vsctl ovs-appctl ovs-ofctl unshare; do
        command -v $t > /dev/null || { echo "$t not found"; return 1; }
    done
    [ -f $OVS_SCHEMA ] || { echo "$OVS_SCHEMA not found"; return 1; }
    [ "$(id -u)" = 0 ] || { echo "ovs-vswitchd needs root here (netns, hugepages)"; return 1; }
    return 0
}

# The switch's DPDK memory, as close to straitd/testpmd's as OVS allows.
# Sets OVS_DPDK_CFG (ovs-vsctl column=value words).
ovs_dpdk_config() {
    local extra="--no-pci --file-prefix=$OVS_PFX --no-telemetry"
    OVS_DPDK_CFG=(other_config:dpdk-init=true "other_config:pmd-cpu-mask=$OVS_PMD_MASK")
    if [ "$MEM" = huge ]; then
        # 512 MB, as straitd and testpmd get (-m 512); the anchor allowed
        # up to 1 GB (socket-limit 1024), which this box often cannot supply.
        OVS_DPDK_CFG+=(other_config:dpdk-socket-mem=512 other_config:dpdk-socket-limit=512)
    else
        # OVS adds --in-memory unless --legacy-mem is given, and --no-huge
        # (legacy memory) cannot run --in-memory: say it, and keep the
        # shared config out of /var/run/dpdk as for the others. In no-huge
        # memory (512 MB or 1 GB) OVS cannot create its shared 262144-mbuf
        # pool ("No buffer space available") and the ports stay down, so
        # each port gets its own pool sized to its queues (per-port-memory).
        extra+=" --no-huge --legacy-mem --no-shconf -m 512"
        OVS_DPDK_CFG+=(other_config:per-port-memory=true)
    fi
    OVS_DPDK_CFG+=("other_config:dpdk-extra=$extra")
}

ovs_port() { # BRIDGE NAME OFPORT SOCK [port columns...] -> ovs-vsctl args
    local br=$1 name=$2 ofport=$3 sock=$4; shift 4
    echo "-- add-port $br $name $* -- set Interface $name type=dpdkvhostuserclient options:vhost-server-path=$sock ofport_request=$ofport"
}

# Neutron's openvswitch firewall driver (neutron/agent/linux/openflow_firewall),
# reduced to the bench's two ports in one security group, in the anchor's
# layout: 0 -> 60 (reg5 = ofport, reg6 = zone = local VLAN) -> 71 (anti-spoof,
# ct) -> 72 (egress rules: any IPv4) -> 73 (local destination?) -> 81 (ct) ->
# 82 (ingress rule: UDP to 5001 from the peer's /16, ct commit) -> output.
ovs_fw_flows() {
    local zone='NXM_NX_REG6[0..15]' p mac net peer
    for p in 1 2; do
        if [ $p = 1 ]; then mac=$MAC1 net=10.0.0.0/16 peer=10.1.0.0/16; else mac=$MAC2 net=10.1.0.0/16 peer=10.0.0.0/16; fi
        echo "table=0,priority=100,in_port=$p,actions=resubmit(,60)"
        echo "table=60,priority=100,in_port=$p,actions=set_field:$p->reg5,set_field:1->reg6,resubmit(,71)"
        echo "table=71,priority=95,arp,reg5=$p,in_port=$p,dl_src=$mac,arp_spa=$net,actions=resubmit(,94)"
        echo "table=71,priority=65,ip,reg5=$p,in_port=$p,dl_src=$mac,nw_src=$net,actions=ct(table=72,zone=$zone)"
        echo "table=71,priority=10,reg5=$p,in_port=$p,actions=resubmit(,93)"
        echo "table=72,priority=77,ct_state=+est-rel-rpl,ct_zone=1,ct_mark=0,reg5=$p,actions=resubmit(,73)"
        echo "table=72,priority=77,ct_state=+new-est,ip,reg5=$p,actions=resubmit(,73)"
        echo "table=73,priority=100,reg6=1,dl_dst=$mac,actions=set_field:$p->reg5,resubmit(,81)"
        echo "table=81,priority=90,ip,reg5=$p,actions=ct(table=82,zone=$zone)"
        echo "table=82,priority=77,ct_state=+est-rel-rpl,ct_zone=1,ct_mark=0,reg5=$p,actions=output:$p"
        echo "table=82,priority=77,ct_state=+new-est,udp,reg5=$p,nw_src=$peer,tp_dst=5001,actions=ct(commit,zone=$zone),output:$p"
    done
    cat <<EOF
table=0,priority=0,actions=drop
table=72,priority=50,ct_state=+inv+trk,actions=resubmit(,93)
table=72,priority=40,ct_state=-est,ip,actions=resubmit(,93)
table=73,priority=90,ct_state=+new-est,ip,actions=ct(commit,zone=$zone),resubmit(,94)
table=73,priority=80,actions=resubmit(,94)
table=81,priority=0,actions=resubmit(,93)
table=82,priority=50,ct_state=+inv+trk,actions=resubmit(,93)
table=82,priority=40,ct_state=-est,ip,actions=resubmit(,93)
table=93,priority=0,actions=drop
table=94,priority=1,actions=NORMAL
EOF
}

# vlan_sg_default (neutron's default group with remote-group rules) has no
# OVS pipeline here: no row, not a failure.
sw_ovs_supports() { case "$1" in l2|vlan|vlan_sg) return 0 ;; *) return 1 ;; esac; }

ovs_bridge_of() { case "$1" in l2) echo br0 ;; *) echo br-int ;; esac; }

ovs_fail() { # message: prints it with the tails of the OVS logs
    echo "ovs: $*"
    tail -6 "$CUR_SWLOG" 2>/dev/null | grep -v '^$'
    [ -f "$OVS_DIR/ovsdb-server.log" ] && tail -3 "$OVS_DIR/ovsdb-server.log"
    # without an ovs-vswitchd run_one calls no sw_ovs_stop: clean up here
    [ -n "$SW_PID" ] || sw_ovs_cleanup
    return 1
}

sw_ovs_start() { # scenario sock1 sock2 log
    local sc=$1 s1=$2 s2=$3 log=$4 br t ports
    br=$(ovs_bridge_of "$sc")
    case "$sc" in
    l2) ports="$(ovs_port $br vhu1 1 "$s1") $(ovs_port $br vhu2 2 "$s2") -- set bridge $br fail_mode=secure" ;;
    vlan|vlan_sg) ports="$(ovs_port $br vhu1 1 "$s1" tag=1) $(ovs_port $br vhu2 2 "$s2" tag=1)" ;;
    *) echo "ovs: unknown scenario $sc"; return 1 ;;
    esac
    sw_ovs_cleanup
    mkdir -p "$OVS_DIR" || return 1
    ovs_env ovsdb-tool create "$OVS_DIR/conf.db" $OVS_SCHEMA >> "$log" 2>&1 || ovs_fail "ovsdb-tool create failed" || return 1
    ovs_env taskset -c $GEN_CPU ovsdb-server "$OVS_DIR/conf.db" --remote=punix:$OVS_DIR/db.sock \
        --pidfile=$OVS_DIR/ovsdb-server.pid --unixctl=$OVS_DIR/ovsdb-server.ctl \
        --log-file=$OVS_DIR/ovsdb-server.log --detach --no-chdir >> "$log" 2>&1 < /dev/null ||
        ovs_fail "ovsdb-server did not start" || return 1
    OVS_DB_PID=$(cat $OVS_DIR/ovsdb-server.pid 2>/dev/null)
    # The whole configuration goes in before ovs-vswitchd starts: it comes up
    # with its bridge and both ports.
    ovs_dpdk_config
    # shellcheck disable=SC2086
    ovs_vsctl --no-wait init -- set Open_vSwitch . "${OVS_DPDK_CFG[@]}" \
        -- add-br $br -- set bridge $br datapath_type=netdev $ports >> "$log" 2>&1 ||
        ovs_fail "ovs-vsctl: cannot configure $br and its ports" || return 1
    # Own network namespace (taps of internal ports die with it); non-PMD
    # threads inherit core $GEN_CPU, OVS pins the PMD thread to core $SW_CPU.
    # env, unshare and taskset exec: SW_PID is ovs-vswitchd itself.
    env OVS_RUNDIR=$OVS_DIR OVS_LOGDIR=$OVS_DIR OVS_DBDIR=$OVS_DIR OVS_SYSCONFDIR=$OVS_DIR \
        unshare --net taskset -c $GEN_CPU $OVS_VSWITCHD unix:$OVS_DIR/db.sock \
        --pidfile=$OVS_DIR/ovs-vswitchd.pid --unixctl=$OVS_DIR/ovs-vswitchd.ctl --no-chdir \
        --log-file="$log" -vconsole:off -vsyslog:off >> "$log" 2>&1 < /dev/null &
    SW_PID=$!
    for t in $(seq 300); do
        kill -0 $SW_PID 2>/dev/null || { ovs_fail "ovs-vswitchd exited during start-up"; return 1; }
        [ "$(ovs_vsctl --no-wait get Interface vhu2 ofport 2>/dev/null)" = 2 ] &&
            [ "$(ovs_vsctl --no-wait get Interface vhu1 ofport 2>/dev/null)" = 1 ] &&
            [ -S "$OVS_DIR/$br.mgmt" ] && break
        sleep 0.1
    done
    [ "$(ovs_vsctl --no-wait get Open_vSwitch . dpdk_initialized 2>/dev/null)" = true ] ||
        { ovs_fail "DPDK did not initialise in ovs-vswitchd within 30 s"; return 1; }
    [ -S "$OVS_DIR/$br.mgmt" ] || { ovs_fail "ports not up within 30 s: $(ovs_vsctl --no-wait get Interface vhu1 error 2>&1) $(ovs_vsctl --no-wait get Interface vhu2 error 2>&1)"; return 1; }
    case "$sc" in
    l2) echo "table=0,priority=1,in_port=1,actions=output:2" > "$OVS_DIR/flows" ;;
    vlan) : > "$OVS_DIR/flows" ;;
    vlan_sg) ovs_fw_flows > "$OVS_DIR/flows" ;;
    esac
    if [ -s "$OVS_DIR/flows" ]; then
        ovs_ofctl --bundle replace-flows $br "$OVS_DIR/flows" >> "$log" 2>&1 ||
            { ovs_fail "ovs-ofctl replace-flows failed"; return 1; }
    fi
    { echo "=== ovs-vsctl show"; ovs_vsctl show
      echo "=== ovs-ofctl dump-flows $br"; ovs_ofctl dump-flows $br
      echo "=== ovs-appctl dpif-netdev/pmd-rxq-show"; ovs_appctl dpif-netdev/pmd-rxq-show
    } >> "$log" 2>&1
    OVS_BR=$br
    return 0
}

sw_ovs_stop() {
    if kill -0 "$SW_PID" 2>/dev/null; then
        ovs_appctl dpif-netdev/pmd-stats-show -pmd $SW_CPU > "$W/ovs-pmd.txt" 2>&1
        local dropped
        dropped=$(ovs_vsctl --no-wait get Interface vhu2 statistics:tx_dropped 2>/dev/null | tr -d '"')
        { echo "=== ovs-appctl dpif-netdev/pmd-stats-show"; cat "$W/ovs-pmd.txt"
          echo "=== ovs-appctl dpctl/dump-flows"; ovs_appctl dpctl/dump-flows
          echo "=== ovs-ofctl dump-flows ${OVS_BR:-br0}"; ovs_ofctl dump-flows "${OVS_BR:-br0}"
          echo "=== interface statistics"
          ovs_vsctl --no-wait --columns=name,statistics list Interface
        } >> "$CUR_SWLOG" 2>&1
        # whole-rep (warm-up included) PMD cycles per packet, as for straitd
        $PY - "$W/ovs-pmd.txt" "${dropped:-NA}" > "$W/metrics.txt" 2>/dev/null <<'PYEOF'
import re, sys
t = open(sys.argv[1]).read()
def g(pat):
    m = re.search(pat, t)
    return m.group(1) if m else "NA"
print(f"cyc_per_pkt={g(r'avg processing cycles per packet: ([0-9.]+)')} "
      f"passes={g(r'avg. datapath passes per packet: ([0-9.]+)')} "
      f"packets={g(r'packets received: ([0-9]+)')} "
      f"upcalls={g(r'miss with success upcall: ([0-9]+)')} "
      f"tx_dropped={sys.argv[2]}")
PYEOF
    fi
    stop_pid "$SW_PID" 10; SW_PID=
    sw_ovs_cleanup
}

# Stops whatever OVS of this bench is left (ovsdb-server, a stray
# ovs-vswitchd) and removes its files; safe to call at any time.
sw_ovs_cleanup() {
    local f pid
    for f in ovs-vswitchd ovsdb-server; do
        pid=$(cat "$OVS_DIR/$f.pid" 2>/dev/null)
        [ -n "$pid" ] || continue
        case "$(cat /proc/$pid/comm 2>/dev/null)" in ovs*) stop_pid "$pid" 5 ;; esac
    done
    if [ -n "$OVS_DB_PID" ] && kill -0 "$OVS_DB_PID" 2>/dev/null; then stop_pid "$OVS_DB_PID" 5; fi
    OVS_DB_PID=
    [ -f "$OVS_DIR/ovsdb-server.log" ] && [ -n "${CUR_SWLOG:-}" ] &&
        cp "$OVS_DIR/ovsdb-server.log" "${CUR_SWLOG%.log}-ovsdb.log" 2>/dev/null
    rm -rf "$OVS_DIR" /var/run/dpdk/$OVS_PFX 2>/dev/null
    return 0
}
