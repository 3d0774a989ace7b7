// ReadFileInto: a whole file read into an AlignedBuffer (a model's own copy of its GGUF bytes).
// read(2) rather than a mapping plus memcpy: the mapped file pages count in the process's
// resident set while they are mapped, so copying a model out of a mapping peaks at twice its
// size (bench/NOTES.md); read into the buffer, the peak is the copy. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "tensor/aligned_buffer.h"

namespace tarmac {

// Replaces *out with the bytes of the regular file `path` (huge_pages as AlignedBuffer::Resize).
// Errors (IoError) name the path: missing, not a regular file, unreadable, or shorter than its
// size when read (changed while reading); *out is then unspecified.
// on_read (optional): called after each chunk (64 MiB) with the bytes read so far and the size.
Status ReadFileInto(const std::string& path, AlignedBuffer* out, bool huge_pages,
                    const std::function<void(uint64_t done, uint64_t total)>& on_read = {});

}  // namespace tarmac
