#pragma once
// Reading API parameters field by field: the conventions every parser of a
// request follows (errors name the field; absent and null mean "not given";
// an unknown field is refused; a value shown back is quoted safely).
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "dataplane/result.h"

namespace strait::ctl {

// invalid_argument "FIELD: problem".
Error field_error(std::string_view field, const std::string& problem);
// The "got ..." part of a type error: the value sent, shortened (never
// inside a UTF-8 character).
std::string got(const nlohmann::json& v);
// Whether JSON text nests arrays and objects deeper than `limit`, judged
// before parsing it: nlohmann's copy, dump and compare recurse per level.
bool nested_deeper_than(std::string_view text, int limit);
// Quoted for a message; bytes that are not UTF-8 become U+FFFD instead of
// throwing (input comes from API clients and libvirt XML).
std::string json_quoted(const std::string& s);
// The field, or null when absent or null (so to_json() output parses back).
const nlohmann::json* find_field(const nlohmann::json& obj, const char* key);
// Refuses a key not in `known`, naming it as prefix + key.
Status check_known_keys(const nlohmann::json& obj, std::initializer_list<std::string_view> known,
                        std::string_view prefix);
Result<std::string> get_string(const nlohmann::json& v, std::string_view field);
Result<bool> get_bool(const nlohmann::json& v, std::string_view field);
Result<int64_t> get_int(const nlohmann::json& v, std::string_view field, int64_t lo, int64_t hi);
bool is_alnum(char c);
// [A-Za-z0-9][A-Za-z0-9_.:-]{0,63}: network, group and rule ids.
bool is_valid_id(std::string_view s);
std::string to_lower(std::string_view s);
// 8-4-4-4-12 hex digits, any case: the lowercase form, or "" when not a UUID.
std::string canonical_uuid(std::string_view s);

}  // namespace strait::ctl
