#!/usr/bin/python3
"""Writes the frames of `make demo` (scripts/demo.sh) as pcap files, one per
traffic source; straitd replays each forever (net_pcap infinite_rx=1).

    make_demo_pcaps.py DIR        writes DIR/<source>.pcap and DIR/topology.txt

Topology (must match what scripts/demo.sh binds):
  network "blue":  vlan 100 on physnet1   vm1, vm2
  network "green": local (this host only) vm3, vm4
  physnet1: the gateway 10.0.1.254 behind the NIC, tagged with VLAN 100
"""
import sys
from pathlib import Path

from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

BCAST = "ff:ff:ff:ff:ff:ff"
SEG_ID = 100

# name: (network, MAC, IP)
VMS = {
    "vm1": ("blue", "02:00:00:00:01:01", "10.0.1.1"),
    "vm2": ("blue", "02:00:00:00:01:02", "10.0.1.2"),
    "vm3": ("green", "02:00:00:00:02:03", "10.0.2.3"),
    "vm4": ("green", "02:00:00:00:02:04", "10.0.2.4"),
}
GATEWAY = ("02:00:00:00:00:fe", "10.0.1.254")  # on physnet1, VLAN 100


def udp(src, dst, size=128, sport=10000, dport=20000):
    """src/dst: (MAC, IP). A UDP frame of `size` bytes (without FCS)."""
    hdr = Ether(src=src[0], dst=dst[0]) / IP(src=src[1], dst=dst[1]) / UDP(sport=sport, dport=dport)
    return hdr / Raw(b"\x00" * max(0, size - len(hdr)))


def arp_who_has(src, target_ip):
    return Ether(src=src[0], dst=BCAST) / ARP(hwsrc=src[0], psrc=src[1], pdst=target_ip)


def tagged(frame, vid):
    """The same frame with an 802.1Q tag (as it is on the physical network)."""
    eth = frame[Ether]
    return Ether(src=eth.src, dst=eth.dst) / Dot1Q(vlan=vid) / eth.payload


def vm(name):
    return VMS[name][1], VMS[name][2]


def flows():
    gw = GATEWAY
    return {
        # blue: VM-to-VM unicast, broadcast ARP, and traffic to the gateway
        # on the physical network (leaves tagged with VLAN 100).
        "vm1": [udp(vm("vm1"), vm("vm2"), 128), udp(vm("vm1"), vm("vm2"), 512, sport=10001),
                arp_who_has(vm("vm1"), gw[1]), udp(vm("vm1"), gw, 256)],
        "vm2": [udp(vm("vm2"), vm("vm1"), 128), udp(vm("vm2"), gw, 1024),
                Ether(src=vm("vm2")[0], dst=gw[0]) / IP(src=vm("vm2")[1], dst=gw[1]) / ICMP()],
        # green: a local network, same kind of traffic, never on the NIC.
        "vm3": [udp(vm("vm3"), vm("vm4"), 64), udp(vm("vm3"), vm("vm4"), 1514),
                arp_who_has(vm("vm3"), vm("vm4")[1])],
        "vm4": [udp(vm("vm4"), vm("vm3"), 64), udp(vm("vm4"), vm("vm3"), 256)],
        # physnet1: the gateway answers the VMs of blue (tagged 100), ARPs
        # for them, and some frames of a VLAN no network here uses (dropped
        # and counted as unknown_vlan).
        "physnet1": [tagged(udp(gw, vm("vm1"), 256), SEG_ID), tagged(udp(gw, vm("vm2"), 1024), SEG_ID),
                     tagged(arp_who_has(gw, vm("vm1")[1]), SEG_ID),
                     tagged(udp(gw, (BCAST, "10.0.1.255"), 128), SEG_ID),
                     tagged(udp((gw[0], "10.0.9.254"), ("02:00:00:00:09:09", "10.0.9.9"), 128), 999)],
    }


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, frames in flows().items():
        wrpcap(str(out / f"{name}.pcap"), frames)
    lines = [f"{name} {net} {mac} {ip}" for name, (net, mac, ip) in VMS.items()]
    (out / "topology.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
