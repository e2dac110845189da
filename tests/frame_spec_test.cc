// The frame of a `trace` request (control/api/frame_spec.h): what it refuses,
// and that the refusal can be sent as a JSON reply.
#include "control/api/frame_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "control/api/api_reply.h"

namespace strait::ctl {
namespace {

using ::testing::HasSubstr;

// A non-hex character of two UTF-8 bytes sits across a digit pair: the
// message showed the pair, half a character, and the reply's dump() threw
// (found by tests/fuzz/api_fuzz; a throw there ends straitd).
TEST(FrameSpecTest, NonHexMultibyteCharacterRefusedWithUtf8Message) {
  auto frame = frame_from_params(nlohmann::json("0200000000020\u00e9000"), std::nullopt);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.error().code, "invalid_argument");
  EXPECT_THAT(frame.error().message, HasSubstr("frame: not hex"));
  std::string line;
  ASSERT_NO_THROW(line = error_reply(frame.error()).dump());
  EXPECT_THAT(line, HasSubstr("not hex"));
}

TEST(FrameSpecTest, HexWithSeparatorsParses) {
  auto frame = frame_from_params(nlohmann::json("02:00-00 00"), std::nullopt);
  ASSERT_TRUE(frame.ok()) << frame.error().message;
  EXPECT_EQ(*frame, (std::vector<uint8_t>{0x02, 0x00, 0x00, 0x00}));
}

}  // namespace
}  // namespace strait::ctl
