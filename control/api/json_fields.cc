#include "control/api/json_fields.h"

#include <algorithm>
#include <cctype>

namespace strait::ctl {

using json = nlohmann::json;

Error field_error(std::string_view field, const std::string& problem) {
  return invalid(std::string(field) + ": " + problem);
}

// "got ..." part of a type error: the value itself, shortened, so the user
// sees what they sent.
std::string got(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) {
    size_t cut = 37;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) cut--;  // continuation byte
    s = s.substr(0, cut) + "...";
  }
  return "got " + s;
}

bool nested_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > limit) return true;
    } else if (ch == ']' || ch == '}') {
      depth--;
    }
  }
  return false;
}

// Absent and null mean the same: "not given". This lets to_json() output
// (which writes null for fields that do not apply) be parsed back.
const json* find_field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status check_known_keys(const json& obj, std::initializer_list<std::string_view> known,
                        std::string_view prefix) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return field_error(std::string(prefix) + it.key(), "unknown field (expected " + list + ")");
  }
  return ok();
}

Result<std::string> get_string(const json& v, std::string_view field) {
  if (!v.is_string()) return field_error(field, "expected a string, " + got(v));
  return v.get<std::string>();
}

Result<bool> get_bool(const json& v, std::string_view field) {
  if (!v.is_boolean()) return field_error(field, "expected true or false, " + got(v));
  return v.get<bool>();
}

Result<int64_t> get_int(const json& v, std::string_view field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return field_error(field, "expected an integer, " + got(v));
  bool in_range = v.is_number_unsigned()
                      ? v.get<uint64_t>() <= static_cast<uint64_t>(hi) && v.get<int64_t>() >= lo
                      : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!in_range) {
    return field_error(field,
                       v.dump() + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v.get<int64_t>();
}

bool is_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// [A-Za-z0-9][A-Za-z0-9_.:-]{0,63}
bool is_valid_id(std::string_view s) {
  if (s.empty() || s.size() > 64 || !is_alnum(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return is_alnum(c) || c == '_' || c == '.' || c == ':' || c == '-';
  });
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Quoted for a message; bytes that are not UTF-8 become U+FFFD instead of
// throwing (input reaches here from API clients and libvirt XML).
std::string json_quoted(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string canonical_uuid(std::string_view s) {
  if (s.size() != 36) return "";
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool dash_pos = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_pos != (out[i] == '-')) return "";
    if (dash_pos) continue;
    if (!std::isxdigit(static_cast<unsigned char>(out[i]))) return "";
    out[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[i])));
  }
  return out;
}

}  // namespace strait::ctl
