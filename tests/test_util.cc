#include "tests/test_util.h"

#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace strait::test {

std::vector<Frame> scapy(const std::string& exprs) {
  char dir[] = "/tmp/strait-scapy-XXXXXX";
  if (!mkdtemp(dir)) throw std::runtime_error("mkdtemp failed");
  std::string script = std::string(dir) + "/gen.py";
  std::string out = std::string(dir) + "/out.pcap";
  {
    std::ofstream f(script);
    f << "import logging\nlogging.getLogger('scapy.runtime').setLevel(logging.ERROR)\n"
      << "from scapy.all import *\n"
      << "from scapy.layers.vxlan import VXLAN\n"
      << "pkts = " << exprs << "\n"
      << "wrpcap('" << out << "', pkts)\n";
  }
  std::string cmd = "/usr/bin/python3 " + script + " 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) throw std::runtime_error("scapy failed for: " + exprs);
  auto frames = read_pcap(out);
  std::remove(script.c_str());
  std::remove(out.c_str());
  rmdir(dir);
  return frames;
}

std::vector<Frame> read_pcap(const std::string& path) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  if (!p) throw std::runtime_error(std::string("pcap open ") + path + ": " + err);
  std::vector<Frame> frames;
  struct pcap_pkthdr* h;
  const u_char* data;
  while (pcap_next_ex(p, &h, &data) == 1) frames.emplace_back(data, data + h->caplen);
  pcap_close(p);
  return frames;
}

void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  pcap_t* p = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* d = pcap_dump_open(p, path.c_str());
  if (!d) throw std::runtime_error("pcap_dump_open " + path);
  for (const auto& f : frames) {
    struct pcap_pkthdr h = {};
    h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(p);
}

}  // namespace strait::test
