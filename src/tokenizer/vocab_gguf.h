// Reads a Vocab from a GGUF file's tokenizer.ggml.* metadata. Pure function of the file.
#pragma once

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

namespace tarmac::tok {

// Errors name the key that is missing or malformed. Defaults follow the GGUF conventions:
// SPM adds BOS and a space prefix unless the file says otherwise; BPE adds neither.
Result<Vocab> LoadVocab(const gguf::File& file);

}  // namespace tarmac::tok
