#pragma once
// Tables for people. Replies are read leniently: unknown fields are ignored,
// a missing or null field prints "-", so an older straitctl still shows what
// a newer straitd sends.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strait::straitctl {

// Columns padded to their widest cell; a column whose cells are all numbers
// (or "-") is right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// obj[key] as a cell: strings as they are, numbers in decimal, lists joined
// with ",", missing, null or empty "-".
std::string cell(const nlohmann::json& obj, const std::string& key);

std::string render_networks(const nlohmann::json& networks);  // a list of network objects
std::string render_ports(const nlohmann::json& ports);        // a list of port objects
std::string render_port_detail(const nlohmann::json& port);
std::string render_show(const nlohmann::json& show);
// `previous` (the last sample, or null) and `seconds` between the two add
// packet rates, for `stats --watch`.
std::string render_stats(const nlohmann::json& stats, const nlohmann::json& previous = nullptr,
                         double seconds = 0);
// Security groups: one row each with its rule and port counts.
std::string render_groups(const nlohmann::json& groups);
// One group: id, name, member ports, then its rules.
std::string render_group_detail(const nlohmann::json& group);
// Rules: direction, ethertype, protocol, port range (or ICMP type/code), remote.
std::string render_rules(const nlohmann::json& rules);
// tunnel show: this host's VTEP, the remote VTEPs and their next hops, then
// per vxlan network its remote MACs and flood list.
std::string render_tunnel(const nlohmann::json& tunnel);
// trace: numbered steps, the verdict, the output ports and their tags.
std::string render_trace(const nlohmann::json& trace);
// cache dump: per worker, one row per flow-cache entry.
std::string render_cache_dump(const nlohmann::json& dump);

}  // namespace strait::straitctl
