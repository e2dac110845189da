#!/usr/bin/python3
"""Writes what the physical network sends in `make demo` (scripts/demo.sh):
DIR/physnet1.pcap, which straitd's physnet1 "NIC" (a net_pcap vdev,
infinite_rx=1) replays forever. The VMs are strait-gen processes on
vhost-user ports and make their own traffic.

    make_demo_pcaps.py DIR

The frames (must match the addresses scripts/demo.sh binds):
  - the gateway 02:00:00:00:00:fe (10.0.1.254), VLAN 100 = network "blue",
    sends UDP to vm6 (02:00:00:00:01:06): NIC-to-VM, untagged at the VM.
    It is also where vm5's traffic goes (VM-to-NIC): straitd learns the
    gateway's MAC from these frames.
  - one ARP broadcast from the gateway in 64 frames: flooded to every VM of
    blue, never to green.
  - one frame in 64 on VLAN 999, which no network uses: dropped and counted
    as unknown_vlan.
The NIC replays as fast as straitd's worker polls it: more than vm6 drains,
so most of it is dropped at vm6's full ring (tx_full), as when a real
NIC's traffic outruns a VM.
"""
import sys
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Padding, Raw
from scapy.utils import wrpcap

BCAST = "ff:ff:ff:ff:ff:ff"
SEG_ID = 100
GATEWAY = ("02:00:00:00:00:fe", "10.0.1.254")
VM6 = ("02:00:00:00:01:06", "10.0.1.6")


def tagged(vid, src, dst, payload):
    return Ether(src=src, dst=dst) / Dot1Q(vlan=vid) / payload


def udp(src, dst, vid, size=60, sport=10000):
    """An 802.1Q-tagged UDP frame of `size` bytes without FCS (60: 64 on the wire)."""
    frame = tagged(vid, src[0], dst[0], IP(src=src[1], dst=dst[1]) / UDP(sport=sport, dport=20000))
    return frame / Raw(b"\x00" * max(0, size - len(frame)))


def frames():
    gw = GATEWAY
    out = [udp(gw, VM6, SEG_ID, sport=10000 + i % 16) for i in range(62)]
    arp = tagged(SEG_ID, gw[0], BCAST, ARP(hwsrc=gw[0], psrc=gw[1], pdst=VM6[1]))
    out.append(arp / Padding(b"\x00" * (60 - len(arp))))
    out.append(udp((gw[0], "10.0.9.254"), ("02:00:00:00:09:09", "10.0.9.9"), 999))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    wrpcap(str(out / "physnet1.pcap"), frames())


if __name__ == "__main__":
    main()
