#include "server/http_request_parser.h"

#include "base/check.h"

namespace tarmac::server {

void ConfigureRequestParser(RequestParser& parser, int64_t max_body_bytes) {
  TARMAC_CHECK(max_body_bytes > 0);
  parser.body_limit(static_cast<uint64_t>(max_body_bytes));
  parser.header_limit(kMaxHeaderBytes);
}

}  // namespace tarmac::server
