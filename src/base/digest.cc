#include "base/digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "base/check.h"

namespace tarmac {

Digest256 Sha256(std::string_view bytes) {
  Digest256 d;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d.data());
  return d;
}

Digest256 HmacSha256(std::string_view key, std::string_view bytes) {
  Digest256 d;
  unsigned int len = 0;
  const unsigned char* out = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d.data(), &len);
  TARMAC_CHECK(out != nullptr && len == d.size());
  return d;
}

std::string Hex(const Digest256& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string s(d.size() * 2, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kDigits[d[i] >> 4];
    s[2 * i + 1] = kDigits[d[i] & 15];
  }
  return s;
}

uint64_t First64(const Digest256& d) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[static_cast<size_t>(i)];
  return v;
}

bool DigestEqual(const Digest256& a, const Digest256& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

std::string RandomBytes(size_t n) {
  std::string s(n, '\0');
  TARMAC_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(n)) == 1);
  return s;
}

}  // namespace tarmac
