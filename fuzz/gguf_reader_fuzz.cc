// libFuzzer target for the GGUF reader. Any input must either be rejected with a DataLoss
// status or parse into a File whose every tensor lies inside the input; a file that parses
// must also survive a rewrite with Writer and parse back equal (reader and writer agree on
// what is valid). Build and run: scripts/fuzz-gguf.sh SECONDS (make fuzz FUZZ_SECONDS=N).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "gguf fuzz: invariant violated: %s\n", what);
  std::abort();
}

void Touch(const tarmac::gguf::File& f, std::span<const uint8_t> in) {
  using namespace tarmac::gguf;
  volatile size_t sink = 0;
  for (const auto& kv : f.metadata()) {
    sink = sink + kv.value.ToJson(8).dump().size() + kv.value.ToString(8).size();
    if (f.Find(kv.key) != &kv.value) Fail("Find does not return the key's value");
    (void)f.GetUint(kv.key);
    (void)f.GetInt(kv.key);
    (void)f.GetFloat(kv.key);
    (void)f.GetString(kv.key);
    (void)f.GetBool(kv.key);
    (void)f.GetStringArray(kv.key);
  }
  for (const auto& t : f.tensors()) {
    if (t.data < in.data() || t.nbytes > in.size() ||
        t.data + t.nbytes > in.data() + in.size())
      Fail("tensor data outside the input");
    if (t.nbytes) sink = sink + t.data[0] + t.data[t.nbytes - 1];
    if (f.FindTensor(t.name) != &t) Fail("FindTensor does not return the tensor");
    if (t.num_elements() <= 0) Fail("non-positive element count");
  }
}

void RoundTrip(const tarmac::gguf::File& f) {
  using namespace tarmac::gguf;
  Writer w;
  for (const auto& kv : f.metadata()) w.SetKV(kv.key, kv.value);
  for (const auto& t : f.tensors())
    if (!w.AddTensor(t.name, t.dims, t.type, t.bytes()).ok()) Fail("writer rejects a read tensor");
  auto out = w.WriteToBuffer();
  if (!out.ok()) Fail("writer rejects read metadata");
  auto g = File::Parse(*out);
  if (!g.ok()) Fail("reader rejects what the writer wrote");
  if (g->metadata().size() != f.metadata().size() || g->tensors().size() != f.tensors().size())
    Fail("round trip changed counts");
  for (size_t i = 0; i < f.metadata().size(); ++i)
    if (g->metadata()[i].key != f.metadata()[i].key ||
        !(g->metadata()[i].value == f.metadata()[i].value))
      Fail("round trip changed metadata");
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = g->tensors()[i];
    if (a.name != b.name || a.dims != b.dims || a.type != b.type || a.nbytes != b.nbytes ||
        std::memcmp(a.data, b.data, a.nbytes) != 0)
      Fail("round trip changed a tensor");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  auto f = tarmac::gguf::File::Parse(in);
  if (!f.ok()) {
    if (f.status().code() != tarmac::StatusCode::kDataLoss) Fail("error is not DataLoss");
    if (f.status().message().rfind("gguf: ", 0) != 0) Fail("error does not start with 'gguf: '");
    return 0;
  }
  Touch(*f, in);
  RoundTrip(*f);
  return 0;
}
