#pragma once
// The shape of every API reply, and the one parameter most methods take.
#include <string>

#include <nlohmann/json.hpp>

#include "dataplane/result.h"

namespace strait::ctl {

inline nlohmann::json error_reply(const Error& e) {
  return {{"ok", false}, {"error", {{"code", e.code}, {"message", e.message}}}};
}
inline nlohmann::json ok_reply(nlohmann::json result) {
  return {{"ok", true}, {"result", std::move(result)}};
}
// params["id"], a string.
inline Result<std::string> id_param(const nlohmann::json& params) {
  if (!params.is_object() || !params.contains("id") || !params["id"].is_string())
    return invalid("id: required string");
  return params["id"].get<std::string>();
}

}  // namespace strait::ctl
