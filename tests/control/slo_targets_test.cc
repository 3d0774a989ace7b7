// SLO targets: the --slo flag's parsing (errors name the bad part), tier ranks and which tiers
// are the lowest (never the top one).
#include "control/slo_targets.h"

#include <gtest/gtest.h>

namespace tarmac::control {
namespace {

TEST(SloTargetsTest, ParsesTierTtftAndTpot) {
  auto t = ParseTierSlo("premium=200:50.5");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->name, "premium");
  EXPECT_DOUBLE_EQ(t->ttft_ms, 200);
  EXPECT_DOUBLE_EQ(t->tpot_ms, 50.5);
}

TEST(SloTargetsTest, BadValuesNameWhatIsWrong) {
  struct Case {
    const char* spec;
    const char* needle;
  };
  for (const Case& c : {Case{"premium", "expected TIER=TTFT_MS:TPOT_MS"}, Case{"premium=200", "TTFT_MS:TPOT_MS after '='"},
                        Case{"premium=abc:50", "the TTFT target 'abc'"}, Case{"premium=200:", "the TPOT target ''"},
                        Case{"premium=0:50", "must be > 0 ms"}, Case{"premium=200:-1", "must be > 0 ms"},
                        Case{"pre mium=200:50", "tier 'pre mium'"}, Case{"=200:50", "tier ''"},
                        Case{"premium=200:50x", "the TPOT target '50x'"}, Case{"premium=inf:50", "must be > 0 ms"}}) {
    auto t = ParseTierSlo(c.spec);
    ASSERT_FALSE(t.ok()) << c.spec;
    EXPECT_EQ(t.status().field(), "--slo");
    EXPECT_NE(t.status().message().find(c.needle), std::string::npos) << c.spec << ": " << t.status().message();
    EXPECT_NE(t.status().message().find(c.spec), std::string::npos) << t.status().message();
  }
}

TEST(SloTargetsTest, RanksFollowTheOrderAndUnlistedTiersRankLast) {
  auto s = SloTargets::FromFlags({"premium=100:20", "standard=500:60", "batch=5000:200"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->Rank("premium"), 0);
  EXPECT_EQ(s->Rank("batch"), 2);
  EXPECT_EQ(s->Rank("other"), 3);
  EXPECT_EQ(s->LowestRank(), 2);
  EXPECT_FALSE(s->IsLowest("premium"));
  EXPECT_FALSE(s->IsLowest("standard"));
  EXPECT_TRUE(s->IsLowest("batch"));
  EXPECT_TRUE(s->IsLowest("other"));
  ASSERT_NE(s->Find("standard"), nullptr);
  EXPECT_DOUBLE_EQ(s->Find("standard")->tpot_ms, 60);
  EXPECT_EQ(s->Find("other"), nullptr);
}

TEST(SloTargetsTest, TheTopTierIsNeverTheLowest) {
  auto one = SloTargets::FromFlags({"premium=100:20"});
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->IsLowest("premium"));
  EXPECT_TRUE(one->IsLowest("standard"));  // unlisted
  SloTargets none;
  EXPECT_EQ(none.LowestRank(), 1);
}

TEST(SloTargetsTest, ATierListedTwiceIsAnError) {
  auto s = SloTargets::FromFlags({"premium=100:20", "premium=200:30"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().field(), "--slo");
  EXPECT_NE(s.status().message().find("listed twice"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace tarmac::control
