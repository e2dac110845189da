"""Physnet -> VM without a veth pair: the physnet is a net_pcap that replays
its rx_pcap forever (infinite_rx=1). Exact counts are meaningless with an
endless source, so the checks are on what arrives (every frame, field by
field) and on ratios."""
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

from conftest import Lab, read_pcap_bytes, wait_for, write_pcap

VM_VLAN, VM_FLAT, HOST = "02:e4:00:00:00:01", "02:e4:00:00:00:02", "02:e4:00:00:00:fe"


def frame(dst, payload, vlan=None):
    l2 = Ether(src=HOST, dst=dst)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan, prio=2)
    return l2 / IP(src="10.4.0.254", dst="10.4.0.1") / UDP(sport=1, dport=2) / Raw(payload * 8)


TO_VLAN = frame(VM_VLAN, b"vlan-120", vlan=120)
UNKNOWN = frame(VM_VLAN, b"vlan-3999", vlan=3999)
TO_FLAT = frame(VM_FLAT, b"flat-----")


@pytest.fixture(scope="module")
def sw(straitd_factory, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay")
    write_pcap(tmp / "physnet.pcap", [TO_VLAN, UNKNOWN, TO_FLAT])
    return straitd_factory(physnets={
        "physnet1": f"net_pcap_up1,rx_pcap={tmp}/physnet.pcap,infinite_rx=1,tx_pcap=/dev/null"},
        name="replay")


def test_replayed_physnet_frames_reach_vms_untagged_and_unknown_vlan_is_dropped(sw):
    lab = Lab(sw)
    try:
        vlan_net = lab.network("vlan", "physnet1", seg=120)
        flat_net = lab.network("flat", "physnet1")
        pv, pf = lab.port(vlan_net, VM_VLAN), lab.port(flat_net, VM_FLAT)

        def sample():
            st = sw.stats()
            phys = [p for p in st["ports"] if p["id"] == "physnet:physnet1"][0]
            tx = {p["id"]: p["tx_packets"] for p in st["ports"]}
            return phys["drops"].get("unknown_vlan", 0), tx[pv.id], tx[pf.id]

        wait_for(lambda: sample()[1] > 0 and sample()[2] > 0, what="replayed frames at the VMs")
        s0 = sample()
        time.sleep(0.2)
        s1 = sample()
        pv.unbind()
        pf.unbind()
        unknown, to_vlan, to_flat = (b - a for a, b in zip(s0, s1))
        # One frame of each kind per replay round: equal rates, give or take.
        assert to_vlan > 100
        assert 0.8 < unknown / to_vlan < 1.25, (unknown, to_vlan, to_flat)
        assert 0.8 < to_flat / to_vlan < 1.25, (unknown, to_vlan, to_flat)

        b_vlan = bytes(TO_VLAN)
        untagged = b_vlan[:12] + b_vlan[16:]
        got_vlan, got_flat = read_pcap_bytes(pv.tx), read_pcap_bytes(pf.tx)
        assert got_vlan and set(got_vlan) == {untagged}  # tag removed, nothing else changed
        assert got_flat and set(got_flat) == {bytes(TO_FLAT)}
        assert len(got_vlan) >= pv.final_stats["tx_packets"]  # it kept coming until unbound
    finally:
        lab.close()
