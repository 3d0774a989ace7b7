#include "base/digest.h"

#include <gtest/gtest.h>

namespace tarmac {
namespace {

TEST(Digest, Sha256KnownVectors) {
  EXPECT_EQ(Hex(Sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(Sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Digest, HmacSha256Rfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Digest, First64AndEquality) {
  const Digest256 d = Sha256("abc");
  EXPECT_EQ(First64(d), 0xba7816bf8f01cfeaull);
  EXPECT_TRUE(DigestEqual(d, Sha256("abc")));
  EXPECT_FALSE(DigestEqual(d, Sha256("abd")));
  EXPECT_EQ(RandomBytes(32).size(), 32u);
  EXPECT_NE(RandomBytes(16), RandomBytes(16));
}

}  // namespace
}  // namespace tarmac
