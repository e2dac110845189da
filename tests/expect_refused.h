#pragma once
// Expects a refused request (a Result or Status in error): its code, and a
// message containing `words`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#define EXPECT_REFUSED(expr, code_, words)                                   \
  do {                                                                       \
    auto r_ = (expr);                                                        \
    ASSERT_FALSE(r_.ok()) << #expr << " succeeded";                          \
    EXPECT_EQ(r_.error().code, code_) << r_.error().message;                 \
    EXPECT_THAT(r_.error().message, ::testing::HasSubstr(words));            \
  } while (0)
