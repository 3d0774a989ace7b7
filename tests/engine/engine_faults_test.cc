// Crash-safety of the engine: a fault injected into one request's processing (detokenizing,
// its forward pass, allocating its KV, a failed invariant check while sampling) fails that
// request with an Internal error, returns its blocks (CheckIntegrity after every step), and
// leaves the requests batched with it producing exactly what they produce alone; a fault
// outside any request's processing kills the step loop, which marks the engine unhealthy and
// ends every waiting request with an error instead of hanging. Faults are refused unless the
// engine was built for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "engine/engine_client.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"

namespace tarmac::engine {
namespace {

using testing::CachedModel;
using testing::FullLengthRequest;
using testing::kWp1m;
using testing::SpreadIds;

TokenEvent Last(RequestStream& s, std::vector<int32_t>* tokens = nullptr) {
  TokenEvent ev;
  for (;;) {
    if (!s.Next(&ev, std::chrono::seconds(60))) {
      ADD_FAILURE() << "stream stalled";
      return ev;
    }
    if (tokens != nullptr && ev.token >= 0) tokens->push_back(ev.token);
    if (ev.last()) return ev;
  }
}

std::unique_ptr<EngineCore> Core(bool faults, int32_t blocks = 128) {
  auto& m = CachedModel(kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = blocks;
  cfg.fault_injection = faults;
  return std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
}

void RunToEnd(EngineCore& core) {
  for (int guard = 0; !core.idle() && guard < 10000; ++guard) {
    core.Step();
    ASSERT_TRUE(core.CheckIntegrity().ok()) << core.CheckIntegrity().message();
  }
  ASSERT_TRUE(core.idle());
}

TEST(EngineFaultsTest, RefusedUnlessTheEngineAllowsThem) {
  auto core = Core(/*faults=*/false);
  EngineRequest r = FullLengthRequest(SpreadIds(8, 1), 4);
  r.fault = InjectedFault::kKernel;
  auto v = core->Validate(r);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().field(), "fault");
  EXPECT_NE(v.status().message().find("fault injection is off"), std::string::npos) << v.status().message();
}

TEST(EngineFaultsTest, NamesParseBothWays) {
  for (InjectedFault f : {InjectedFault::kTokenize, InjectedFault::kDetokenize, InjectedFault::kKernel,
                          InjectedFault::kKvAlloc, InjectedFault::kCheck, InjectedFault::kEngine}) {
    auto p = ParseInjectedFault(InjectedFaultName(f));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, f);
  }
  auto bad = ParseInjectedFault("segfault");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kv_alloc"), std::string::npos) << bad.status().message();
}

class EachFault : public ::testing::TestWithParam<InjectedFault> {};

// Three healthy requests batched with the faulty one (added before the first step, so they
// share its prefill step): the faulty one ends in error, the others exactly as when alone.
TEST_P(EachFault, FailsOnlyItsRequest) {
  const InjectedFault fault = GetParam();
  std::vector<std::vector<int32_t>> alone;
  for (int i = 0; i < 3; ++i) {
    auto core = Core(false);
    auto s = std::make_shared<RequestStream>(1);
    ASSERT_TRUE(core->Add(1, FullLengthRequest(SpreadIds(12 + 5 * i, 100 * i), 10), s).ok());
    RunToEnd(*core);
    alone.emplace_back();
    Last(*s, &alone.back());
  }
  auto core = Core(true);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::make_shared<RequestStream>(i));
    EngineRequest r = i == 1 ? FullLengthRequest(SpreadIds(20, 7), 10) : FullLengthRequest(SpreadIds(12 + 5 * (i ? i - 1 : 0), 100 * (i ? i - 1 : 0)), 10);
    if (i == 1) r.fault = fault;
    ASSERT_TRUE(core->Add(i, r, streams.back()).ok());
  }
  RunToEnd(*core);
  const TokenEvent bad = Last(*streams[1]);
  EXPECT_EQ(bad.finish, FinishReason::kError);
  EXPECT_EQ(bad.error.code(), StatusCode::kInternal);
  EXPECT_NE(bad.error.message().find("internal error while processing the request"), std::string::npos) << bad.error.message();
  int expect = 0;
  for (int i : {0, 2, 3}) {
    std::vector<int32_t> tokens;
    const TokenEvent ev = Last(*streams[i], &tokens);
    EXPECT_EQ(ev.finish, FinishReason::kLength) << "request " << i << ": " << ev.error.message();
    EXPECT_EQ(tokens, alone[static_cast<size_t>(expect++)]) << "request " << i;
  }
  // Nothing held by requests; the engine goes on serving.
  EXPECT_EQ(core->Stats().kv.request_blocks, 0);
  auto s = std::make_shared<RequestStream>(9);
  ASSERT_TRUE(core->Add(9, FullLengthRequest(SpreadIds(12, 0), 10), s).ok());
  RunToEnd(*core);
  std::vector<int32_t> again;
  EXPECT_EQ(Last(*s, &again).finish, FinishReason::kLength);
  EXPECT_EQ(again, alone[0]);
  EXPECT_TRUE(core->CheckIntegrity().ok());
}

INSTANTIATE_TEST_SUITE_P(Faults, EachFault,
                         ::testing::Values(InjectedFault::kDetokenize, InjectedFault::kKernel, InjectedFault::kKvAlloc,
                                           InjectedFault::kCheck),
                         [](const ::testing::TestParamInfo<InjectedFault>& p) {
                           std::string n = InjectedFaultName(p.param);
                           n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
                           return n;
                         });

// A fault in a request that is already decoding (not its first step): its blocks come back too.
TEST(EngineFaultsTest, KvAllocFailureOfARunningRequestFreesItsBlocks) {
  auto core = Core(true);
  auto ok = std::make_shared<RequestStream>(1);
  ASSERT_TRUE(core->Add(1, FullLengthRequest(SpreadIds(30, 3), 40), ok).ok());
  for (int i = 0; i < 3; ++i) core->Step();
  const int32_t held = core->Stats().kv.request_blocks;
  EXPECT_GT(held, 0);
  auto bad = std::make_shared<RequestStream>(2);
  EngineRequest r = FullLengthRequest(SpreadIds(40, 9), 40);
  r.fault = InjectedFault::kKvAlloc;
  ASSERT_TRUE(core->Add(2, r, bad).ok());
  core->Step();
  ASSERT_TRUE(core->CheckIntegrity().ok()) << core->CheckIntegrity().message();
  EXPECT_TRUE(bad->done());
  EXPECT_LE(core->Stats().kv.request_blocks, held + 1);  // only the healthy one's (it may have grown)
  RunToEnd(*core);
  EXPECT_EQ(Last(*bad).finish, FinishReason::kError);
  EXPECT_EQ(Last(*ok).finish, FinishReason::kLength);
  EXPECT_EQ(core->Stats().kv.request_blocks, 0);
}

// The step loop dies: the engine says so, refuses new requests (so a route falls back), and
// every request it held, running or queued, ends with an error instead of waiting forever.
TEST(EngineFaultsTest, EngineFaultMarksTheClientUnhealthy) {
  auto& m = CachedModel(kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 128;
  cfg.fault_injection = true;
  cfg.warmup = false;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  auto running = client->Submit(FullLengthRequest(SpreadIds(16, 2), 400));
  ASSERT_TRUE(running.ok());
  TokenEvent first;
  ASSERT_TRUE((*running)->Next(&first, std::chrono::seconds(60)));  // it is decoding
  EngineRequest r = FullLengthRequest(SpreadIds(16, 5), 8);
  r.fault = InjectedFault::kEngine;
  auto fatal = client->Submit(r);
  ASSERT_TRUE(fatal.ok());
  const TokenEvent a = Last(**fatal), b = Last(**running);
  EXPECT_EQ(a.finish, FinishReason::kError);
  EXPECT_EQ(b.finish, FinishReason::kError);
  EXPECT_EQ(b.error.code(), StatusCode::kInternal);
  EXPECT_NE(b.error.message().find("the engine failed"), std::string::npos) << b.error.message();
  EXPECT_FALSE(client->accepting());
  EXPECT_NE(client->failure().find("injected fault 'engine'"), std::string::npos) << client->failure();
  auto refused = client->Submit(FullLengthRequest(SpreadIds(8, 1), 4));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("unhealthy"), std::string::npos) << refused.status().message();
  client->Shutdown();  // joins the dead loop's thread
}

}  // namespace
}  // namespace tarmac::engine
