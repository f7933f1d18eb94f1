#include "testbed/faults.hpp"

#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"

namespace kvshift::testbed {
namespace {

TEST(Faults, ParsesEveryKey) {
  const FaultSpec f =
      parse_faults("drop=0.01,corrupt=0.001,delay=5ms,disconnect=0.002,stall=20ms,seed=9");
  EXPECT_DOUBLE_EQ(f.drop, 0.01);
  EXPECT_DOUBLE_EQ(f.corrupt, 0.001);
  EXPECT_DOUBLE_EQ(f.delay_s, 0.005);
  EXPECT_DOUBLE_EQ(f.disconnect, 0.002);
  EXPECT_DOUBLE_EQ(f.stall_s, 0.020);
  EXPECT_EQ(f.seed, 9u);
  EXPECT_TRUE(f.any());
  EXPECT_FALSE(parse_faults("none").any());
}

void expect_error(const std::string& spec, const std::string& part) {
  try {
    parse_faults(spec);
    ADD_FAILURE() << spec << " was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--faults"), std::string::npos) << what;
    EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

TEST(Faults, BadSpecsNameTheFlagAndTheKey) {
  expect_error("dorp=0.1", "dorp");
  expect_error("drop=-0.1", "drop");
  expect_error("drop=1.5", "drop");
  expect_error("drop=1", "nothing ever arrives");  // every frame lost: a transfer never ends
  expect_error("drop=0.5,corrupt=0.3", "at most 0.75");
  expect_error("corrupt=abc", "corrupt");
  expect_error("delay=-5ms", "delay");
  expect_error("delay=5", "delay");
  expect_error("drop", "key=value");
  expect_error("seed=x", "seed");
}

TEST(Faults, DiceAreReproduciblePerTransferAndAttempt) {
  const FaultSpec f = parse_faults("drop=0.3,corrupt=0.3,disconnect=0.1,delay=1ms,seed=4");
  FaultDice a(f, 17, 1), b(f, 17, 1), c(f, 18, 1);
  int same_as_other_transfer = 0;
  for (int i = 0; i < 200; ++i) {
    const FrameFate x = a.next(), y = b.next(), z = c.next();
    ASSERT_EQ(x.drop, y.drop);
    ASSERT_EQ(x.corrupt, y.corrupt);
    ASSERT_EQ(x.disconnect, y.disconnect);
    ASSERT_EQ(x.corrupt_bit, y.corrupt_bit);
    ASSERT_EQ(x.delay_s, y.delay_s);
    same_as_other_transfer += (x.corrupt_bit == z.corrupt_bit);
  }
  EXPECT_LT(same_as_other_transfer, 5);
}

TEST(Faults, RatesAreWhatTheSpecSays) {
  const FaultSpec f = parse_faults("drop=0.1,corrupt=0.05");
  FaultDice d(f, 1, 1);
  int drops = 0, corrupt = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const FrameFate x = d.next();
    drops += x.drop;
    corrupt += x.corrupt;
  }
  EXPECT_NEAR(drops / double(n), 0.1, 0.01);
  EXPECT_NEAR(corrupt / double(n), 0.05, 0.008);
}

}  // namespace
}  // namespace kvshift::testbed
