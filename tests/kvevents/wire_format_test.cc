// The KV-event wire format: exact bytes of small batches (written out by hand from msgpack's
// spec, so the encoder is not checked against itself), grouping of chained blocks, both event
// forms through the decoder, and errors that name the malformed field. An independent decoder
// (python3-msgpack) checks the structure llm-d's and vLLM's decoders expect (check_wire.py).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "common/test_util.h"
#include "kvevents/wire_format.h"

namespace tarmac::kvevents {
namespace {

using prefix::BlockEvent;

BlockEvent Stored(uint64_t h, std::optional<uint64_t> parent, std::vector<int32_t> tokens) {
  BlockEvent e;
  e.kind = BlockEvent::Kind::kStored;
  e.hash = h;
  e.parent = parent;
  e.tokens = std::move(tokens);
  return e;
}
BlockEvent Removed(uint64_t h) {
  BlockEvent e;
  e.kind = BlockEvent::Kind::kRemoved;
  e.hash = h;
  return e;
}
BlockEvent Cleared() {
  BlockEvent e;
  e.kind = BlockEvent::Kind::kCleared;
  return e;
}

std::string Hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

TEST(WireFormatTest, AClearedBatchIsExactlyTheseBytes) {
  const std::vector<BlockEvent> ev = {Cleared()};
  WireOptions o;
  o.block_size = 2;
  // [1.5, [["AllBlocksCleared"]], 0]: fixarray(3), float64 1.5, fixarray(1), fixarray(1),
  // fixstr(16) "AllBlocksCleared", positive fixint 0.
  EXPECT_EQ(Hex(EncodeBatch(1.5, ev, o)),
            "93" "cb3ff8000000000000" "91" "91" "b0" + Hex("AllBlocksCleared") + "00");
}

TEST(WireFormatTest, AStoredEventIsPositionalInVllmsFieldOrder) {
  const std::vector<BlockEvent> ev = {Stored(0xABCDEF0123456789ull, std::nullopt, {1, 300})};
  WireOptions o;
  o.block_size = 2;
  o.medium = "CPU";
  // ["BlockStored", [hash], nil, [1, 300], 2, nil, "CPU", nil]
  const std::string expected = "93" "cb3ff8000000000000" "91" "98" "ab" + Hex("BlockStored") +
                               "91" "cfabcdef0123456789" "c0" "92" "01" "cd012c" "02" "c0" "a3" + Hex("CPU") + "c0" "00";
  EXPECT_EQ(Hex(EncodeBatch(1.5, ev, o)), expected);
}

TEST(WireFormatTest, TheMapFormTagsEventsByType) {
  const std::vector<BlockEvent> ev = {Removed(7)};
  WireOptions o;
  o.format = EventFormat::kMap;
  // {"type": "BlockRemoved", "block_hashes": [7], "medium": "CPU"}
  const std::string expected = "93" "cb3ff8000000000000" "91" "83" "a4" + Hex("type") + "ac" + Hex("BlockRemoved") +
                               "ac" + Hex("block_hashes") + "9107" "a6" + Hex("medium") + "a3" + Hex("CPU") + "00";
  EXPECT_EQ(Hex(EncodeBatch(1.5, ev, o)), expected);
}

TEST(WireFormatTest, ChainedBlocksGroupIntoOneStoredEventAndRemovalsIntoOne) {
  // a -> b -> c chain, then d (another namespace's first block), then removals of c and b.
  const std::vector<BlockEvent> ev = {Cleared(),         Stored(1, std::nullopt, {10, 11}), Stored(2, 1, {12, 13}),
                                      Stored(3, 2, {14, 15}), Stored(4, std::nullopt, {20, 21}), Removed(3),
                                      Removed(2)};
  for (EventFormat f : {EventFormat::kArray, EventFormat::kMap}) {
    WireOptions o;
    o.format = f;
    o.block_size = 2;
    auto b = DecodeBatch(EncodeBatch(42.25, ev, o));
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(b->ts, 42.25);
    EXPECT_EQ(b->data_parallel_rank, 0);
    ASSERT_EQ(b->events.size(), 4u) << EventFormatName(f);
    EXPECT_EQ(b->events[0].kind, WireEvent::Kind::kCleared);
    EXPECT_EQ(b->events[1].hashes, (std::vector<uint64_t>{1, 2, 3}));
    EXPECT_FALSE(b->events[1].parent.has_value());
    EXPECT_EQ(b->events[1].tokens, (std::vector<int32_t>{10, 11, 12, 13, 14, 15}));
    EXPECT_EQ(b->events[1].block_size, 2);
    EXPECT_EQ(b->events[1].medium, "CPU");
    EXPECT_EQ(b->events[2].hashes, (std::vector<uint64_t>{4}));
    EXPECT_EQ(b->events[3].kind, WireEvent::Kind::kRemoved);
    EXPECT_EQ(b->events[3].hashes, (std::vector<uint64_t>{3, 2}));
  }
}

TEST(WireFormatTest, AChildOfAnEarlierBlockStartsANewGroupWithItsParent) {
  const std::vector<BlockEvent> ev = {Stored(1, std::nullopt, {1}), Stored(2, 1, {2}), Stored(5, 1, {5})};
  WireOptions o;
  o.block_size = 1;
  auto b = DecodeBatch(EncodeBatch(0, ev, o));
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->events.size(), 2u);
  EXPECT_EQ(b->events[1].hashes, (std::vector<uint64_t>{5}));
  EXPECT_EQ(b->events[1].parent, 1u);
}

TEST(WireFormatTest, SequenceNumbersAreBigEndianAndTheEndMarkerIsMinusOne) {
  EXPECT_EQ(Hex(EncodeSeq(0x0102030405060708ull)), "0102030405060708");
  EXPECT_EQ(*DecodeSeq(EncodeSeq(123456789)), 123456789u);
  EXPECT_EQ(Hex(EndOfReplayMarker()), "ffffffffffffffff");
  EXPECT_FALSE(DecodeSeq("1234").ok());
}

TEST(WireFormatTest, MalformedPayloadsAreErrorsNamingTheField) {
  auto msg = [](std::string_view p) { return DecodeBatch(p).status().message(); };
  EXPECT_NE(msg("\xc1").find("not msgpack"), std::string::npos);
  EXPECT_NE(msg("\x91\x01").find("expected [ts, events"), std::string::npos);
  // [1.5, "x", 0]
  EXPECT_NE(msg(std::string("\x93\xcb\x3f\xf8\0\0\0\0\0\0\xa1x\x00", 13)).find("payload[1] (events)"), std::string::npos);
  // A stored event whose token count does not fit its blocks.
  WireOptions o;
  o.block_size = 2;
  std::string good = EncodeBatch(1.5, std::vector<BlockEvent>{Stored(9, std::nullopt, {1, 2})}, o);
  std::string bad = good;
  bad[bad.size() - 8] = '\x03';  // block_size 2 -> 3
  EXPECT_NE(msg(bad).find("events[0]"), std::string::npos) << msg(bad);
  // An unknown tag.
  std::string tag = EncodeBatch(1.5, std::vector<BlockEvent>{Cleared()}, o);
  tag[tag.find("AllBlocksCleared")] = 'B';
  EXPECT_NE(msg(tag).find("unknown event tag 'BllBlocksCleared'"), std::string::npos);
  EXPECT_FALSE(ParseEventFormat("json").ok());
  EXPECT_NE(ParseEventFormat("json").status().message().find("'json'"), std::string::npos);
}

// python3-msgpack reads what llm-d's Go structs and vLLM's msgspec structs expect, in both forms.
TEST(WireFormatTest, AnIndependentDecoderReadsVllmsStructure) {
  // Debian's interpreter, where python3-msgpack installs (not a pyenv shim's).
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  ASSERT_EQ(std::system((python + " -c 'import msgpack' 2>/dev/null").c_str()), 0)
      << "python3-msgpack is not installed (scripts/install-deps.sh installs it)";
  const std::vector<BlockEvent> ev = {Cleared(), Stored(1ull << 63, std::nullopt, {1, 2}), Stored(5, 1ull << 63, {3, 4}),
                                      Removed(5)};
  for (EventFormat f : {EventFormat::kArray, EventFormat::kMap}) {
    WireOptions o;
    o.format = f;
    o.block_size = 2;
    const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-kv-batch-" + EventFormatName(f) + ".bin";
    std::ofstream(path, std::ios::binary) << EncodeBatch(1.5, ev, o);
    const std::string cmd = python + " '" + TARMAC_SOURCE_DIR + "/tests/kvevents/check_wire.py' " +
                            EventFormatName(f) + " '" + path + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

}  // namespace
}  // namespace tarmac::kvevents
