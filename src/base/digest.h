// Cryptographic digests (OpenSSL): SHA-256 and HMAC-SHA-256, for API key digests, cache keys
// that must never collide across scopes, and namespaces derived from a server-side secret.
// Pure functions, thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tarmac {

using Digest256 = std::array<unsigned char, 32>;

Digest256 Sha256(std::string_view bytes);
Digest256 HmacSha256(std::string_view key, std::string_view bytes);
// Lower-case hex of the digest (64 characters).
std::string Hex(const Digest256& d);
// The first 8 bytes, big-endian: a 64-bit value drawn from the digest.
uint64_t First64(const Digest256& d);
// Constant-time comparison (CRYPTO_memcmp).
bool DigestEqual(const Digest256& a, const Digest256& b);
// n cryptographically random bytes (RAND_bytes); aborts if the generator fails.
std::string RandomBytes(size_t n);

}  // namespace tarmac
