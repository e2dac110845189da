// straitd's config file (control/daemon/config.h) from any text: a Config or an
// error that names the file, never a crash or an exception.
#include <cstdint>
#include <string>
#include <string_view>

#include "control/daemon/config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = strait::ctl::parse_config(text, "fuzz.toml");
  if (!cfg) {
    strait::fuzz::check_error(cfg.error());
    STRAIT_FUZZ_CHECK(cfg.error().code == "invalid_argument");
    STRAIT_FUZZ_CHECK(cfg.error().message.rfind("config fuzz.toml", 0) == 0);
    return 0;
  }
  // What the rest of straitd takes for granted of a loaded config.
  STRAIT_FUZZ_CHECK(!cfg->worker_lcores.empty());
  STRAIT_FUZZ_CHECK(cfg->flow_cache_entries > 0);
  STRAIT_FUZZ_CHECK(!cfg->vtep || cfg->physnets.count(cfg->vtep->physnet) == 1);
  return 0;
}
