#pragma once
// What every fuzz target checks besides "no crash" (ASan, UBSan): a failed
// check aborts, which libFuzzer reports as a crash with the input saved.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "dataplane/result.h"

namespace strait::fuzz {

#define STRAIT_FUZZ_CHECK(cond)                                                     \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

// Text that goes to a client in a reply: valid UTF-8 (the strict
// serialisation straitd's replies once died of throws otherwise).
inline bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// An error as the API and the logs show it: a known code, a message that
// says something and can be sent.
inline void check_error(const Error& e) {
  static const char* const kCodes[] = {"invalid_argument", "not_found",          "already_exists",
                                       "conflict",         "resource_exhausted", "device_error",
                                       "internal",         "failed_precondition"};
  bool known = false;
  for (const char* c : kCodes) known = known || e.code == c;
  if (!known) std::fprintf(stderr, "unknown error code '%s'\n", e.code.c_str());
  STRAIT_FUZZ_CHECK(known);
  STRAIT_FUZZ_CHECK(!e.message.empty());
  STRAIT_FUZZ_CHECK(valid_utf8(e.message));
}

}  // namespace strait::fuzz
