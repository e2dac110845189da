#pragma once
// Helpers shared by tests: frames made by scapy, pcap files.
#include <cstdint>
#include <string>
#include <vector>

namespace strait::test {

using Frame = std::vector<uint8_t>;

// Runs Debian's python3 with scapy on `exprs`, a Python expression that
// evaluates to a list of packets (e.g. "[Ether()/IP()/UDP()]"), and returns
// their bytes. Aborts the test on failure.
std::vector<Frame> scapy(const std::string& exprs);

// Reads every frame of a pcap file (libpcap).
std::vector<Frame> read_pcap(const std::string& path);
// Writes frames to a pcap file (Ethernet link type).
void write_pcap(const std::string& path, const std::vector<Frame>& frames);

}  // namespace strait::test
