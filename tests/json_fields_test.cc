// json_fields: the pieces every request parser uses to read and quote what a client sent.
#include "control/api/json_fields.h"

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

using nlohmann::json;

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

TEST(JsonFields, GotNeverCutsInsideAUtf8Character) {
  // "mtu": 30 x "é" (2 bytes each) used to be cut at byte 37, inside one.
  for (int lead = 0; lead < 4; lead++) {
    const std::string s = got(json(std::string(lead, 'x') + [] {
      std::string e;
      for (int i = 0; i < 30; i++) e += "\xc3\xa9";
      return e;
    }()));
    EXPECT_TRUE(valid_utf8(s)) << lead;
    EXPECT_TRUE(s.ends_with("...")) << s;
    EXPECT_LE(s.size(), std::string("got ").size() + 40);
  }
  const std::string cjk = got(json(std::string(20, 'a') + "\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad"
                                                          "\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad"));
  EXPECT_TRUE(valid_utf8(cjk)) << cjk;
}

TEST(JsonFields, GotQuotesShortValuesWhole) {
  EXPECT_EQ(got(json("abc")), "got \"abc\"");
  EXPECT_EQ(got(json(12)), "got 12");
}

TEST(JsonFields, NestedDeeperThanCountsOnlyStructureOutsideStrings) {
  EXPECT_FALSE(nested_deeper_than(R"({"a": [[1]]})", 3));
  EXPECT_TRUE(nested_deeper_than(R"({"a": [[[1]]]})", 3));
  // Brackets inside strings, escaped quotes included, are not structure.
  EXPECT_FALSE(nested_deeper_than(R"({"a": "[[[[[[\"[[[["})", 1));
  EXPECT_TRUE(nested_deeper_than(std::string(100000, '['), 64));
  EXPECT_FALSE(nested_deeper_than(std::string(64, '[') + std::string(64, ']'), 64));
  EXPECT_TRUE(nested_deeper_than(std::string(65, '{'), 64));
}

}  // namespace
}  // namespace strait::ctl
