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
#   vxlan    VXLAN encap as neutron's openvswitch agent has it (d): br-int
#            (NORMAL, VM port vhu1 with local VLAN tag 1, the remote MAC2 as
#            a static fdb entry on patch-tun) -> patch -> br-tun (the
#            agent's tables 0 -> 2 -> 20: strip_vlan, set tun_id, output to
#            vxlan0) -> vxlan0 (remote $VTEP_REMOTE, local $VTEP_LOCAL) ->
#            br-phy (the VTEP address on its internal port, tnl/arp/set of
#            the remote VTEP) -> phy0, a type=dpdk port on the generator's
#            sink socket (net_vhost1 client, Strait's physnet device)
#   vxlan_decap  the same bridges the other way: the generator (on phy0 =
#            net_vhost0) plays the remote VTEP; br-phy terminates the tunnel
#            (its MAC is the generator's outer destination), br-tun tables
#            0 -> 4 (tun_id -> local VLAN 1) -> 10 -> patch -> br-int NORMAL
#            -> vhu2 (tag 1; MAC2 as a static fdb entry there)

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
         "main/handler/revalidator/vhost threads and ovsdb-server on core $GEN_CPU; dpdkvhostuserclient ports;" \
         "--workers N: N PMDs on cores 1..N, pair i's rx queues pinned to the PMD on core i+1)"
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
# --workers: the same for every generator/sink pair, pair i on ofports
# 2i+1 and 2i+2 with local VLAN (zone) i+1.
ovs_fw_flows() {
    local zone='NXM_NX_REG6[0..15]' p mac net peer z
    for ((p = 1; p <= 2 * NW; p++)); do
        z=$(( (p + 1) / 2 ))
        if [ $((p % 2)) = 1 ]; then mac=$(pair_mac $((z - 1)) 1) net=10.0.0.0/16 peer=10.1.0.0/16
        else mac=$(pair_mac $((z - 1)) 2) net=10.1.0.0/16 peer=10.0.0.0/16; fi
        echo "table=0,priority=100,in_port=$p,actions=resubmit(,60)"
        echo "table=60,priority=100,in_port=$p,actions=set_field:$p->reg5,set_field:$z->reg6,resubmit(,71)"
        echo "table=71,priority=95,arp,reg5=$p,in_port=$p,dl_src=$mac,arp_spa=$net,actions=resubmit(,94)"
        echo "table=71,priority=65,ip,reg5=$p,in_port=$p,dl_src=$mac,nw_src=$net,actions=ct(table=72,zone=$zone)"
        echo "table=71,priority=10,reg5=$p,in_port=$p,actions=resubmit(,93)"
        echo "table=72,priority=77,ct_state=+est-rel-rpl,ct_zone=$z,ct_mark=0,reg5=$p,actions=resubmit(,73)"
        echo "table=72,priority=77,ct_state=+new-est,ip,reg5=$p,actions=resubmit(,73)"
        echo "table=73,priority=100,reg6=$z,dl_dst=$mac,actions=set_field:$p->reg5,resubmit(,81)"
        echo "table=81,priority=90,ip,reg5=$p,actions=ct(table=82,zone=$zone)"
        echo "table=82,priority=77,ct_state=+est-rel-rpl,ct_zone=$z,ct_mark=0,reg5=$p,actions=output:$p"
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
sw_ovs_supports() { case "$1" in l2|vlan|vlan_sg|vxlan|vxlan_decap) return 0 ;; *) return 1 ;; esac; }

ovs_bridge_of() { case "$1" in l2) echo br0 ;; *) echo br-int ;; esac; }

# vxlan/vxlan_decap: br-phy's MAC. In vxlan_decap it must be the outer
# destination MAC of the generator's frames (strait-gen's --outer-dst-mac
# default): OVS terminates a tunnel only for frames to the bridge's MAC.
OVS_PHY_MAC=02:00:00:00:00:fd
ovs_netns() { nsenter -t "$SW_PID" -n "$@"; }   # ovs-vswitchd's network namespace

# neutron's openvswitch agent's br-tun for one vxlan network (local VLAN 1,
# VNI $VNI) with l2population, in the anchor's layout: patch-int = 1,
# vxlan0 = 2. 0: from br-int -> 2, from the tunnel -> 4; 2: unicast -> 20,
# multicast -> 22; 4: VNI -> local VLAN -> 10 -> br-int; 20: the remote
# MAC (l2pop) -> strip the VLAN, set the VNI, out the tunnel; 22: flood.
ovs_tun_flows() {
    local vni; vni=$(printf '0x%x' "$VNI")
    cat <<EOF
table=0,priority=1,in_port=1,actions=resubmit(,2)
table=0,priority=1,in_port=2,actions=resubmit(,4)
table=0,priority=0,actions=drop
table=2,priority=0,dl_dst=00:00:00:00:00:00/01:00:00:00:00:00,actions=resubmit(,20)
table=2,priority=0,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=resubmit(,22)
table=4,priority=1,tun_id=$vni,actions=mod_vlan_vid:1,resubmit(,10)
table=4,priority=0,actions=drop
table=10,priority=1,actions=output:1
table=20,priority=2,dl_vlan=1,dl_dst=$MAC2,actions=strip_vlan,load:$vni->NXM_NX_TUN_ID[],output:2
table=20,priority=0,actions=resubmit(,22)
table=22,priority=1,dl_vlan=1,actions=strip_vlan,load:$vni->NXM_NX_TUN_ID[],output:2
table=22,priority=0,actions=drop
EOF
}

# After ovs-vswitchd is up (vxlan/vxlan_decap): the VTEP address on
# br-phy's internal port (in ovs-vswitchd's namespace: OVS's tunnel route
# comes from it), the remote VTEP's MAC (tnl/arp/set: the static next hop,
# as Strait's next_hop_mac; no ARP), the static fdb entries, br-tun's flows.
ovs_tunnel_setup() { # scenario log
    local sc=$1 log=$2 t net=${VTEP_LOCAL%.*}.0/24
    for t in $(seq 100); do ovs_netns ip link show br-phy > /dev/null 2>&1 && break; sleep 0.1; done
    { ovs_netns sysctl -qw net.ipv6.conf.br-phy.disable_ipv6=1   # no ND/MLD frames at the sink
      ovs_netns ip addr add "$VTEP_LOCAL/24" dev br-phy && ovs_netns ip link set br-phy up
    } >> "$log" 2>&1 || { ovs_fail "cannot put $VTEP_LOCAL/24 on br-phy in ovs-vswitchd's namespace"; return 1; }
    for t in $(seq 100); do
        ovs_appctl ovs/route/show 2>/dev/null | grep -q "$net dev br-phy" && break
        sleep 0.1
    done
    ovs_appctl ovs/route/show 2>/dev/null | grep -q "$net dev br-phy" ||
        { ovs_fail "OVS has no route to $net via br-phy"; return 1; }
    { ovs_appctl tnl/arp/set br-phy "$VTEP_REMOTE" "$NEXT_HOP_MAC" &&
      if [ "$sc" = vxlan ]; then
          # where the next hop is on the underlay, and MAC2 behind the tunnel
          ovs_appctl fdb/add br-phy phy0 0 "$NEXT_HOP_MAC" &&
          ovs_appctl fdb/add br-int patch-tun 1 "$MAC2"
      else
          # the VM (the sink) sends nothing: MAC2 as a static entry, as
          # Strait knows its port's MAC
          ovs_appctl fdb/add br-int vhu2 1 "$MAC2"
      fi
    } >> "$log" 2>&1 || { ovs_fail "ovs-appctl tnl/arp/set or fdb/add failed"; return 1; }
    ovs_tun_flows > "$OVS_DIR/tun.flows"
    ovs_ofctl --bundle replace-flows br-tun "$OVS_DIR/tun.flows" >> "$log" 2>&1 ||
        { ovs_fail "ovs-ofctl replace-flows br-tun failed"; return 1; }
    { echo "=== ovs-appctl ovs/route/show"; ovs_appctl ovs/route/show
      echo "=== ovs-appctl tnl/arp/show"; ovs_appctl tnl/arp/show
      echo "=== ovs-appctl tnl/ports/show -v"; ovs_appctl tnl/ports/show -v
      echo "=== ip -br addr (ovs-vswitchd's namespace)"; ovs_netns ip -br addr
    } >> "$log" 2>&1
    return 0
}

ovs_fail() { # message: prints it with the tails of the OVS logs
    echo "ovs: $*"
    tail -6 "$CUR_SWLOG" 2>/dev/null | grep -v '^$'
    [ -f "$OVS_DIR/ovsdb-server.log" ] && tail -3 "$OVS_DIR/ovsdb-server.log"
    # without an ovs-vswitchd run_one calls no sw_ovs_stop: clean up here
    [ -n "$SW_PID" ] || sw_ovs_cleanup
    return 1
}

sw_ovs_start() { # scenario sock1 sock2 log
    local sc=$1 s1=$2 s2=$3 log=$4 br t ports x ok=0 late= late_if= vm
    br=$(ovs_bridge_of "$sc")
    # what the start waits for: interface:ofport, and each bridge's socket
    local wait_if="vhu1:1 vhu2:2" wait_br=$br
    OVS_SINK_IF=vhu2 OVS_BRS=$br
    # --workers: pair i's ports vhu(2i+1) and vhu(2i+2) (ofports alike) on
    # local VLAN i+1, their rx queues pinned to the PMD on core i+1
    # (pmd-rxq-affinity): OVS's own rebalance assigns by the cycles of whole
    # 10-s intervals, which the warm-up does not have, and then piles the
    # busy queues on one PMD. Pair 0 is the one pair without --workers.
    local i pin pairs_l2= pairs_vlan= pairs_if= pairs_sink= socks=("$s1" "$s2" "${SOCKS[@]:2}")
    for ((i = 1; i <= 2 * NW; i++)); do
        pin=
        [ $WORKERS_MODE = 1 ] && pin="-- set Interface vhu$i other_config:pmd-rxq-affinity=0:${FWD_CPUS[(i - 1) / 2]}"
        pairs_l2+=" $(ovs_port $br vhu$i $i "${socks[i - 1]}") $pin"
        pairs_vlan+=" $(ovs_port $br vhu$i $i "${socks[i - 1]}" tag=$(( (i + 1) / 2 ))) $pin"
        pairs_if+=" vhu$i:$i"
        [ $((i % 2)) = 0 ] && pairs_sink+=" vhu$i"
    done
    case "$sc" in
    l2|vlan|vlan_sg) wait_if=$pairs_if OVS_SINK_IF=$pairs_sink ;;
    esac
    case "$sc" in
    l2) ports="$pairs_l2 -- set bridge $br fail_mode=secure" ;;
    vlan|vlan_sg) ports=$pairs_vlan ;;
    vxlan|vxlan_decap)
        # vxlan: the VM is vhu1 (the generator) and the underlay NIC phy0 is
        # the sink's socket; vxlan_decap: the other way round. phy0 is a
        # type=dpdk port on the DPDK vhost PMD (client of the generator's
        # server socket: the device string Strait's physnet gets), with the
        # anchor's mtu_request=1600 (the vhost PMD refuses MTU changes and
        # carries the 1564-byte frames anyway). The port on the generator's
        # transmitting socket is added last, once the tunnel is set up
        # (ovs_tunnel_setup): the generator starts when both links are up,
        # and its first frames then find the whole path in place.
        local vmp phyp
        if [ "$sc" = vxlan ]; then
            vmp="$(ovs_port $br vhu1 1 "$s1" tag=1)" vm=vhu1:1
            phyp="net_vhost1,iface=$s2,client=1,queues=1"
        else
            vmp="$(ovs_port $br vhu2 2 "$s2" tag=1)" vm=vhu2:2
            phyp="net_vhost0,iface=$s1,client=1,queues=1"
        fi
        phyp="-- add-port br-phy phy0 -- set Interface phy0 type=dpdk options:dpdk-devargs=$phyp ofport_request=1 mtu_request=1600"
        ports="-- add-port $br patch-tun -- set Interface patch-tun type=patch options:peer=patch-int ofport_request=10"
        ports+=" -- add-br br-tun -- set bridge br-tun datapath_type=netdev"
        ports+=" -- add-port br-tun patch-int -- set Interface patch-int type=patch options:peer=patch-tun ofport_request=1"
        ports+=" -- add-port br-tun vxlan0 -- set Interface vxlan0 type=vxlan ofport_request=2"
        ports+=" options:remote_ip=$VTEP_REMOTE options:local_ip=$VTEP_LOCAL options:in_key=flow options:out_key=flow options:dst_port=4789"
        ports+=" -- add-br br-phy -- set bridge br-phy datapath_type=netdev other_config:hwaddr=$OVS_PHY_MAC"
        wait_br="$br br-tun br-phy"
        if [ "$sc" = vxlan ]; then ports+=" $phyp" late=$vmp wait_if=phy0:1 late_if=$vm
        else ports+=" $vmp" late=$phyp wait_if=$vm late_if=phy0:1; fi
        OVS_BRS="$br br-tun br-phy"
        OVS_SINK_IF=phy0; [ "$sc" = vxlan_decap ] && OVS_SINK_IF=vhu2
        ;;
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
    # with its bridge and both ports (vxlan/vxlan_decap: its bridges and
    # every port but the one the generator sends into, added after the
    # tunnel's route, ARP entry and flows).
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
        ok=1
        for x in $wait_if; do
            [ "$(ovs_vsctl --no-wait get Interface "${x%:*}" ofport 2>/dev/null)" = "${x#*:}" ] || { ok=0; break; }
        done
        for x in $wait_br; do [ -S "$OVS_DIR/$x.mgmt" ] || ok=0; done
        [ $ok = 1 ] && break
        sleep 0.1
    done
    [ "$(ovs_vsctl --no-wait get Open_vSwitch . dpdk_initialized 2>/dev/null)" = true ] ||
        { ovs_fail "DPDK did not initialise in ovs-vswitchd within 30 s"; return 1; }
    if [ $ok = 0 ]; then
        local errs=
        for x in $wait_if; do
            errs+="${x%:*}: ofport $(ovs_vsctl --no-wait get Interface "${x%:*}" ofport 2>&1) $(ovs_vsctl --no-wait get Interface "${x%:*}" error 2>&1); "
        done
        ovs_fail "ports or bridges not up within 30 s: $errs"; return 1
    fi
    case "$sc" in
    l2) for ((i = 1; i <= 2 * NW; i += 2)); do echo "table=0,priority=1,in_port=$i,actions=output:$((i + 1))"; done > "$OVS_DIR/flows" ;;
    vlan|vxlan|vxlan_decap) : > "$OVS_DIR/flows" ;;   # br-int: the default NORMAL flow
    vlan_sg) ovs_fw_flows > "$OVS_DIR/flows" ;;
    esac
    if [ -n "$late" ]; then
        ovs_tunnel_setup "$sc" "$log" || return 1
        # shellcheck disable=SC2086
        ovs_vsctl $late >> "$log" 2>&1 || { ovs_fail "ovs-vsctl: cannot add ${late_if%:*}"; return 1; }
        for t in $(seq 100); do
            [ "$(ovs_vsctl --no-wait get Interface "${late_if%:*}" ofport 2>/dev/null)" = "${late_if#*:}" ] && break
            sleep 0.1
        done
        [ "$(ovs_vsctl --no-wait get Interface "${late_if%:*}" ofport 2>/dev/null)" = "${late_if#*:}" ] ||
            { ovs_fail "${late_if%:*} not up within 10 s: $(ovs_vsctl --no-wait get Interface "${late_if%:*}" error 2>&1)"; return 1; }
    fi
    if [ -s "$OVS_DIR/flows" ]; then
        ovs_ofctl --bundle replace-flows $br "$OVS_DIR/flows" >> "$log" 2>&1 ||
            { ovs_fail "ovs-ofctl replace-flows failed"; return 1; }
    fi
    { echo "=== ovs-vsctl show"; ovs_vsctl show
      for x in $OVS_BRS; do echo "=== ovs-ofctl dump-flows $x"; ovs_ofctl dump-flows $x; done
      echo "=== ovs-appctl dpif-netdev/pmd-rxq-show"; ovs_appctl dpif-netdev/pmd-rxq-show
    } >> "$log" 2>&1
    OVS_BR=$br
    return 0
}

# --workers: the queues are pinned (sw_ovs_start); where they are, with the
# load OVS measured on them once every pair's traffic runs.
sw_ovs_traffic_runs() { echo "=== ovs-appctl dpif-netdev/pmd-rxq-show"; ovs_appctl dpif-netdev/pmd-rxq-show; }

sw_ovs_stop() {
    if kill -0 "$SW_PID" 2>/dev/null; then
        # every PMD's (--workers: N of them; the main thread forwards nothing here)
        ovs_appctl dpif-netdev/pmd-stats-show > "$W/ovs-pmd.txt" 2>&1
        local dropped= x n
        for x in ${OVS_SINK_IF:-vhu2}; do
            n=$(ovs_vsctl --no-wait get Interface "$x" statistics:tx_dropped 2>/dev/null | tr -d '"')
            [[ $n =~ ^[0-9]+$ ]] && dropped=$(( ${dropped:-0} + n ))
        done
        { echo "=== ovs-appctl dpif-netdev/pmd-stats-show"; cat "$W/ovs-pmd.txt"
          echo "=== ovs-appctl dpctl/dump-flows"; ovs_appctl dpctl/dump-flows
          if [ "${OVS_DUMP_FLOWS:-1}" = 1 ]; then
              local x
              for x in ${OVS_BRS:-${OVS_BR:-br0}}; do
                  echo "=== ovs-ofctl dump-flows $x"; ovs_ofctl dump-flows "$x"
                  echo "=== ovs-appctl fdb/show $x"; ovs_appctl fdb/show "$x"
              done
          else   # ovs_ctl_rep: 73 000 flows
              echo "=== ovs-ofctl dump-aggregate ${OVS_BR:-br0}"; ovs_ofctl dump-aggregate "${OVS_BR:-br0}"
          fi
          echo "=== interface statistics"
          ovs_vsctl --no-wait --columns=name,statistics list Interface
        } >> "$CUR_SWLOG" 2>&1
        # whole-rep (warm-up included) PMD cycles per packet, as for straitd
        $PY - "$W/ovs-pmd.txt" "${dropped:-NA}" > "$W/metrics.txt" 2>/dev/null <<'PYEOF'
import re, sys
t = open(sys.argv[1]).read()
def total(pat):  # summed over the PMDs (and the main thread)
    v = re.findall(pat, t)
    return sum(int(x) for x in v) if v else None
# per packet: processing cycles / packets received ("avg processing cycles
# per packet: C (X/N)"); passes: (received + recirculations) / received
cyc = re.findall(r"avg processing cycles per packet: [0-9.]+ \(([0-9]+)/([0-9]+)\)", t)
def ratio(pairs):
    n = sum(int(b) for a, b in pairs)
    return f"{sum(int(a) for a, b in pairs) / n:.2f}" if n else "NA"
pk, up = total(r"packets received: ([0-9]+)"), total(r"miss with success upcall: ([0-9]+)")
recirc = total(r"packet recirculations: ([0-9]+)") or 0
passes = f"{(pk + recirc) / pk:.2f}" if pk else "NA"
print(f"cyc_per_pkt={ratio(cyc)} passes={passes} packets={pk if pk is not None else 'NA'} "
      f"upcalls={up if up is not None else 'NA'} tx_dropped={sys.argv[2]}")
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

# ------------------------------------------------- control plane (issue 8) ---
# The OVS side of run.sh's control-plane points; Strait's side is
# lifecycle_bench.py (scenario_control_sg in bulk, scenario_rule_change).
#
# control_N_ports: the N ports of lifecycle_bench.py's control_sg (same
# MACs, fixed IPv4 + IPv6 and security groups: sg_port_params, SG_GROUPS),
# as nova/os-vif and neutron's openvswitch agent would program them on an
# OVS-DPDK host: ONE ovs-vsctl transaction adding N dpdkvhostuserclient
# ports to br-int with local VLAN tag 1 (vhost-server-path: sockets nobody
# serves, as Strait's client-mode ports), then ONE `ovs-ofctl --bundle
# add-flows` of the flows neutron's openvswitch firewall driver installs
# for them (ovs_ctl_prepare), then `ovs-ofctl dump-aggregate` until the
# table holds them all. ovs-vsctl waits until ovs-vswitchd has applied the
# transaction (every port has its ofport), as Strait's reply comes once the
# ports are in the datapath.
#
# Writes OVS_CTL_DIR/vsctl (ovs-vsctl arguments, one per line) and
# OVS_CTL_DIR/flows; prints the number of flows. Ports get ofport 100 + i.
ovs_ctl_prepare() { # N DIR
    $PY - "$HERE" "$1" "$2" "$W/c" <<'PYEOF'
import ipaddress, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import lifecycle_bench as lb   # the same ports and groups as Strait's control_sg

n, out, vdir = int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
TAG = 1                         # local VLAN of network "bench" = conntrack zone
ZONE = "zone=NXM_NX_REG6[0..15]"
EST, NEW = "+est-rel-rpl", "+new-est"
ports = [lb.sg_port_params(i, vdir) for i in range(n)]
args = []
for i, p in enumerate(ports):
    name = f"cp{i:04d}"
    args += ["--", "add-port", "br-int", name, f"tag={TAG}", "--", "set", "Interface", name,
             "type=dpdkvhostuserclient", f"options:vhost-server-path={vdir}/{name}.sock",
             f"ofport_request={100 + i}", f'external_ids:iface-id={p["id"]}',
             f'external_ids:attached-mac={p["mac"]}', "external_ids:iface-status=active"]
(out / "vsctl").write_text("\n".join(args) + "\n")

def lladdr(mac):
    b = bytes.fromhex(mac.replace(":", ""))
    eui = bytes([b[0] ^ 2]) + b[1:3] + b"\xff\xfe" + b[3:]
    return str(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + eui))

PROTO = {("IPv4", None): "ip", ("IPv6", None): "ipv6", ("IPv4", "tcp"): "tcp",
         ("IPv6", "tcp"): "tcp6", ("IPv4", "udp"): "udp", ("IPv6", "udp"): "udp6",
         ("IPv4", "icmp"): "icmp", ("IPv6", "ipv6-icmp"): "icmp6"}
flows = []
merged = {}   # conjunction flows that share a match: one flow, every conjunction action
conj_ids = {}

def conj(match, action):
    merged.setdefault(match, []).append(action)

members = {}  # group -> [(ethertype, ip)]
for p in ports:
    for g in p["security_groups"]:
        members.setdefault(g, []).extend(
            ("IPv6" if ":" in ip else "IPv4", ip) for ip in p["fixed_ips"])

for i, p in enumerate(ports):
    P, M = 100 + i, p["mac"]
    v4 = [ip for ip in p["fixed_ips"] if ":" not in ip]
    v6 = [ip for ip in p["fixed_ips"] if ":" in ip] + [lladdr(M)]
    # transient table: which port, which zone (initialize_port_flows)
    flows += [f"table=0,priority=100,in_port={P},actions=resubmit(,60)",
              f"table=60,priority=100,in_port={P},actions=set_field:{P}->reg5,set_field:{TAG}->reg6,resubmit(,71)",
              f"table=60,priority=90,dl_vlan={TAG},dl_dst={M},actions=set_field:{P}->reg5,set_field:{TAG}->reg6,strip_vlan,resubmit(,81)",
              f"table=73,priority=100,reg6={TAG},dl_dst={M},actions=set_field:{P}->reg5,resubmit(,81)",
              f"table=73,priority=90,ct_state=+new-est,ip,reg5={P},actions=ct(commit,{ZONE}),resubmit(,94)",
              f"table=73,priority=90,ct_state=+new-est,ipv6,reg5={P},actions=ct(commit,{ZONE}),resubmit(,94)",
              f"table=73,priority=80,reg5={P},actions=resubmit(,94)",
              f"table=94,priority=12,reg6={TAG},dl_dst={M},actions=output:{P}"]
    # base egress (71): anti-spoofing, ARP/ND, DHCP, then conntrack
    base = f"reg5={P},in_port={P}"
    flows += [f"table=71,priority=95,arp,{base},dl_src={M},arp_spa={ip},actions=resubmit(,94)" for ip in v4]
    flows += [f"table=71,priority=95,icmp6,{base},dl_src={M},ipv6_src={ip},icmp_type={t},actions=resubmit(,94)"
              for ip in v6 for t in (130, 131, 132, 135, 136)]
    flows += [f"table=71,priority=80,udp,{base},dl_src={M},nw_src=0.0.0.0,tp_src=68,tp_dst=67,actions=resubmit(,73)",
              f"table=71,priority=80,udp6,{base},dl_src={M},ipv6_src={lladdr(M)},tp_src=546,tp_dst=547,actions=resubmit(,73)",
              f"table=71,priority=70,udp,{base},tp_src=67,tp_dst=68,actions=resubmit(,93)",
              f"table=71,priority=70,udp6,{base},tp_src=547,tp_dst=546,actions=resubmit(,93)"]
    flows += [f"table=71,priority=65,ip,{base},dl_src={M},nw_src={ip},actions=ct(table=72,{ZONE})" for ip in v4]
    flows += [f"table=71,priority=65,ipv6,{base},dl_src={M},ipv6_src={ip},actions=ct(table=72,{ZONE})" for ip in v6]
    flows += [f"table=71,priority=10,{base},actions=resubmit(,93)"]
    # base ingress (81): ARP/ND/DHCP straight out, the rest through conntrack
    flows += [f"table=81,priority=100,arp,reg5={P},actions=output:{P}"]
    flows += [f"table=81,priority=100,icmp6,reg5={P},icmp_type={t},actions=output:{P}" for t in (130, 131, 132, 135, 136)]
    flows += [f"table=81,priority=95,udp,reg5={P},tp_src=67,tp_dst=68,actions=output:{P}",
              f"table=81,priority=95,udp6,reg5={P},tp_src=547,tp_dst=546,actions=output:{P}",
              f"table=81,priority=90,ct_state=-trk,ip,reg5={P},actions=ct(table=82,{ZONE})",
              f"table=81,priority=90,ct_state=-trk,ipv6,reg5={P},actions=ct(table=82,{ZONE})",
              f"table=81,priority=80,ct_state=+trk,reg5={P},actions=resubmit(,82)"]
    # connection state (72 egress, 82 ingress)
    for t, ok in ((72, "resubmit(,73)"), (82, f"output:{P}")):
        flows += [f"table={t},priority=77,ct_state=+est-rel-rpl,ct_zone={TAG},ct_mark=0,reg5={P},{e},actions={ok}"
                  for e in ("ip", "ipv6")]
        flows += [f"table={t},priority=77,ct_state=-new-est+rel-inv,ct_zone={TAG},ct_mark=0,reg5={P},actions={ok}",
                  f"table={t},priority=73,ct_state=+est-rel+rpl,ct_zone={TAG},ct_mark=0,reg5={P},actions=resubmit(,94)",
                  f"table={t},priority=53,ct_mark=0x1,reg5={P},actions=resubmit(,93)",
                  f"table={t},priority=40,ct_state=-est,reg5={P},actions=resubmit(,93)"]
    # the groups' rules, for the new and the established state
    for g in p["security_groups"]:
        for r in lb.SG_GROUPS[g]:
            t = 72 if r["direction"] == "egress" else 82
            proto = PROTO[(r["ethertype"], r.get("protocol"))]
            m = f"{proto},reg5={P}"
            if r.get("port_range_min") is not None:
                assert r["port_range_min"] == r["port_range_max"], r
                m += f",tp_dst={r['port_range_min']}"
            pfx = r.get("remote_ip_prefix")
            if pfx and not pfx.endswith("/0"):
                fld = ("nw_" if r["ethertype"] == "IPv4" else "ipv6_") + ("src" if t == 82 else "dst")
                m += f",{fld}={pfx}"
            for st in (EST, NEW):
                if t == 72:
                    act = "resubmit(,73)"
                else:
                    act = (f"ct(commit,{ZONE})," if st == NEW else "") + f"output:{P}"
                rg = r.get("remote_group_id")
                if rg is None:
                    flows.append(f"table={t},priority=70,ct_state={st},{m},actions={act}")
                    continue
                # remote group: a conjunction of "this port" and "from a member"
                key = (g, rg, r["direction"], r["ethertype"], proto, st)
                cid = conj_ids.setdefault(key, len(conj_ids) + 1)
                conj(f"table={t},priority=71,ct_state={st},{m}", f"conjunction({cid},2/2)")
                flows.append(f"table={t},priority=71,conj_id={cid},ct_state={st},{m},actions={act}")
for (g, rg, d, eth, proto, st), cid in conj_ids.items():
    t = 72 if d == "egress" else 82
    fld = ("nw_" if eth == "IPv4" else "ipv6_") + ("src" if t == 82 else "dst")
    for e, ip in members.get(rg, []):
        if e == eth:
            conj(f"table={t},priority=71,ct_state={st},{proto},reg6={TAG},{fld}={ip}",
                 f"conjunction({cid},1/2)")
flows += [f"{m},actions={','.join(a)}" for m, a in merged.items()]
(out / "flows").write_text("\n".join(flows) + "\n")
print(len(flows))
PYEOF
}

# The rule of rule_change: port 2's ingress rule of the vlan_sg pipeline
# (ovs_fw_flows), UDP to 5001 from port 1's /16: without it, strait-gen's
# frames from port 1 to port 2 are dropped in table 82.
OVS_CTL_RULE="table=82,priority=77,ct_state=+new-est,udp,reg5=2,nw_src=10.0.0.0/16,tp_dst=5001"

# ovs_ctl_rep REP N CHANGES TSV: one rep of both control-plane scenarios on
# a fresh OVS (sw_ovs_start's vlan_sg: br-int, vhu1/vhu2 = strait-gen
# --gap-watch's two virtio-user servers, the firewall pipeline); appends
# run.sh's control rows to TSV (switch scenario flows rep status values note).
ovs_ctl_rep() {
    local rep=$1 n=$2 k=$3 tsv=$4 scn=control_1000_ports   # its name whatever N is: flows = N
    local s1=$W/vhu1.sock s2=$W/vhu2.sock glog=$W/ctl-ovs-$rep-gen.log t status=ok note= nflows aff=
    local OVS_DUMP_FLOWS=0   # sw_ovs_stop: the flow count, not 73 000 flows
    CUR_SWLOG=$W/ctl-ovs-$rep.log
    ctl_row() { printf 'ovs\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$rep" "$3" "$4" "$5" >> "$tsv"; }
    ctl_fail() { # why: both scenarios of this rep fail
        log "control rep $rep ovs: FAILED: $*"
        ctl_row "$scn" "$n" failed "" "$*"; ctl_row rule_change 1 failed "" "$*"
        [ -n "$GENPID" ] && { stop_pid "$GENPID" 5; GENPID=; }
        [ -n "$SW_PID" ] && sw_ovs_stop
        sw_ovs_cleanup
        [ -n "$aff" ] && taskset -pc "$aff" $$ > /dev/null 2>&1
        return 1
    }
    rm -rf "$s1" "$s2" "$W/c"; mkdir -p "$W/c"
    taskset -c $GEN_CPU "$GEN" --lcores "0@$GEN_CPU" --file-prefix $PFX-gen $GEN_MEM \
        --no-pci --no-telemetry --log-level=lib.eal:error \
        --vdev "virtio_user0,path=$s1,server=1,queue_size=1024" \
        --vdev "virtio_user1,path=$s2,server=1,queue_size=1024" -- \
        --gap-watch 20 --interval-us 200 --src-mac $MAC1 --dst-mac $MAC2 --link-timeout 60 \
        > "$glog" 2>&1 < /dev/null &
    GENPID=$!
    for t in $(seq 100); do [ -S "$s1" ] && break; kill -0 $GENPID 2>/dev/null || break; sleep 0.1; done
    [ -S "$s1" ] || { ctl_fail "strait-gen --gap-watch did not create $s1"; return 1; }
    sw_ovs_start vlan_sg "$s1" "$s2" "$CUR_SWLOG" > "$W/start-err.txt" ||
        { ctl_fail "$(tr '\n' ' ' < "$W/start-err.txt")"; return 1; }
    for t in $(seq 300); do grep -q '^RX_FIRST' "$glog" && break; sleep 0.1; done
    grep -q '^RX_FIRST' "$glog" || { ctl_fail "no frame from vhu1 to vhu2 through the firewall pipeline in 30 s"; return 1; }
    # The OVS tools (ovs-vsctl, ovs-ofctl) run on core $GEN_CPU, as
    # lifecycle_bench.py, Strait's client, does (taskset -c $GEN_CPU): this
    # shell moves there until the end of the rep.
    aff=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //')
    taskset -pc $GEN_CPU $$ > /dev/null 2>&1
    # The N ports' configuration and flows are computed before the clock
    # starts, as Strait's bind parameters are.
    local d=$OVS_DIR/ctl; mkdir -p "$d"
    nflows=$(ovs_ctl_prepare "$n" "$d") || { ctl_fail "ovs_ctl_prepare failed"; return 1; }
    local base; base=$(ovs_ofctl dump-aggregate br-int | sed -n 's/.*flow_count=\([0-9]*\).*/\1/p')
    local want=$(( base + nflows )) args
    mapfile -t args < "$d/vsctl"
    # ---- control_N_ports: first call -> all ports and flows in ovs-vswitchd
    local t0=$EPOCHREALTIME t1 t2 t3 have=0 rc=0
    ovs_env timeout 300 ovs-vsctl --db=unix:$OVS_DIR/db.sock --timeout=280 "${args[@]}" \
        >> "$CUR_SWLOG" 2>&1 || rc=$?
    t1=$EPOCHREALTIME
    [ $rc = 0 ] && { ovs_env timeout 300 ovs-ofctl --bundle add-flows unix:$OVS_DIR/br-int.mgmt "$d/flows" \
        >> "$CUR_SWLOG" 2>&1 || rc=$?; }
    t2=$EPOCHREALTIME
    if [ $rc = 0 ]; then
        for t in $(seq 3000); do
            have=$(ovs_ofctl dump-aggregate br-int | sed -n 's/.*flow_count=\([0-9]*\).*/\1/p')
            [ "${have:-0}" -ge $want ] && break
            sleep 0.01
        done
    fi
    t3=$EPOCHREALTIME
    if [ $rc != 0 ]; then
        status=failed; note="ovs-vsctl/ovs-ofctl failed (rc $rc): $(tail -2 "$CUR_SWLOG" | tr '\n\t' '  ')"
    elif [ "${have:-0}" -lt $want ]; then
        status=failed; note="dump-aggregate: $have flows, not $want, after 30 s"
    else
        # ovs-vsctl returned once ovs-vswitchd applied it: every port has its ofport
        local live
        live=$(ovs_vsctl --no-wait -f csv --no-headings --columns=name,ofport list Interface |
               awk -F, '$1 ~ /^"?cp[0-9]/ && $2 >= 100' | wc -l)
        [ "$live" = "$n" ] || { status=failed; note="only $live of $n ports have their ofport"; }
    fi
    local ms; ms=$(awk -v a=$t0 -v b=$t3 'BEGIN{printf "%.3f", (b-a)*1e3}')
    [ $status = ok ] && note=$(awk -v a=$t0 -v b=$t1 -v c=$t2 -v d=$t3 -v f=$nflows -v w=$want 'BEGIN{
        printf "metric=vsctl+bundle_add_flows+dump_aggregate_ms detect=ovs-vsctl_waits_for_vswitchd+dump-aggregate_flow_count vsctl_ms=%.1f ofctl_bundle_ms=%.1f dump_check_ms=%.1f flows_added=%d flows_total=%d",
               (b-a)*1e3, (c-b)*1e3, (d-c)*1e3, f, w}')
    ctl_row "$scn" "$n" "$status" "$([ $status = ok ] && echo "$ms")" "$note"
    log "control rep $rep ovs: $scn ${status/ok/$ms ms} ($note)"
    { echo "=== ovs-vsctl show (head)"; ovs_vsctl show | head -20
      echo "=== ovs-ofctl dump-aggregate br-int"; ovs_ofctl dump-aggregate br-int
      echo "=== ovs-appctl dpif-netdev/pmd-rxq-show (head)"; ovs_appctl dpif-netdev/pmd-rxq-show | head -8
    } >> "$CUR_SWLOG" 2>&1
    # ---- rule_change: the rule that lets vhu1's frames into vhu2, removed
    # and added again K times; each add timed from the ovs-ofctl call to the
    # first frame strait-gen receives through it (RX_RESUME: the first
    # arrival after >= 20 ms without any; one frame every 200 us). A sample
    # counts only if nothing had arrived for 50 ms before the add (the
    # removal had taken effect); otherwise it is left out (skipped=).
    local allow=() reply=() deny=() tdel=() ta tr line nres j ok=1 skipped=0 tries=0
    note=
    ovs_ofctl --bundle --strict del-flows br-int "$OVS_CTL_RULE" >> "$CUR_SWLOG" 2>&1 ||
        { ok=0; note="ovs-ofctl del-flows failed: $(tail -1 "$CUR_SWLOG")"; }
    sleep 0.3
    j=0
    while [ ${#allow[@]} -lt "$k" ] && [ $tries -lt $((2 * k + 3)) ]; do
        [ $ok = 1 ] || break
        j=$((j + 1)); tries=$((tries + 1))
        nres=$(grep -c '^RX_RESUME' "$glog")
        ta=$EPOCHREALTIME
        ovs_ofctl --bundle add-flow br-int "$OVS_CTL_RULE,actions=ct(commit,zone=NXM_NX_REG6[0..15]),output:2" \
            >> "$CUR_SWLOG" 2>&1 || { ok=0; note="ovs-ofctl add-flow failed"; break; }
        tr=$EPOCHREALTIME
        line=
        for t in $(seq 1000); do
            line=$(grep '^RX_RESUME' "$glog" | sed -n "$((nres + 1))p")
            [ -n "$line" ] && break
            sleep 0.005
        done
        [ -n "$line" ] || { ok=0; note="no frame through the added rule within 5 s"; break; }
        if awk -v a=$ta -v l="$line" 'BEGIN{split(l,f,/[ =]/); exit !(f[5] < a - 0.05)}'; then
            allow+=("$(awk -v a=$ta -v l="$line" 'BEGIN{split(l,f,/[ =]/); printf "%.3f", (f[3]-a)*1e3}')")
            reply+=("$(awk -v a=$ta -v b=$tr 'BEGIN{printf "%.3f", (b-a)*1e3}')")
        else
            skipped=$((skipped + 1))
        fi
        # the deny of the previous change: its last frame is this line's last_ts
        [ $j -gt 1 ] && deny+=("$(awk -v a="${tdel[-1]}" -v l="$line" 'BEGIN{split(l,f,/[ =]/); printf "%.3f", (f[5]-a)*1e3}')")
        sleep 0.1
        tdel+=("$EPOCHREALTIME")
        ovs_ofctl --bundle --strict del-flows br-int "$OVS_CTL_RULE" >> "$CUR_SWLOG" 2>&1 ||
            { ok=0; note="ovs-ofctl del-flows failed"; break; }
        sleep 0.25
    done
    # leave the rule in, as it was
    ovs_ofctl --bundle add-flow br-int "$OVS_CTL_RULE,actions=ct(commit,zone=NXM_NX_REG6[0..15]),output:2" >> "$CUR_SWLOG" 2>&1
    if [ $ok = 1 ] && [ ${#allow[@]} -gt 0 ]; then
        note="metric=rule_add_to_first_packet_ms detect=strait-gen_gap-watch(sink_arrival,200us_interval)"
        note+=" ofctl_reply_ms=$(IFS=,; echo "${reply[*]}") deny_to_last_packet_ms=$(IFS=,; echo "${deny[*]}")"
        note+=" flows_in_table=$want skipped=$skipped"
        ctl_row rule_change 1 ok "$(IFS=,; echo "${allow[*]}")" "$note"
        log "control rep $rep ovs: rule_change add -> first frame: ${allow[*]} ms (ovs-ofctl returned: ${reply[*]} ms)"
    else
        ctl_row rule_change 1 failed "" "${note:-no sample}"
        log "control rep $rep ovs: rule_change FAILED: $note"
    fi
    stop_pid "$GENPID" 5; GENPID=
    sw_ovs_stop
    [ -n "$aff" ] && taskset -pc "$aff" $$ > /dev/null 2>&1
    # ovs-vswitchd logs an rx queue assignment of every port for every port
    # it adds (N^2/2 lines, about 70 MB for 1000 ports): keep it compressed
    gzip -f "$CUR_SWLOG" 2>/dev/null
    return 0
}
