// AlignedBuffer: an owning, 64-byte-aligned byte buffer (cache-line and AVX-512 aligned).
// Movable, not copyable. Not thread-safe to resize; contents may be shared read-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>
#include <utility>
#include <vector>

namespace tarmac {

class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 64;
  static constexpr size_t kHugePage = size_t{2} << 20;
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { Resize(bytes); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Discards contents; new bytes are zeroed unless zero is false (for a buffer the caller
  // overwrites entirely: zeroing a large one first touches every page on one thread, and then
  // the caller touches it again). huge_pages: 2 MiB-aligned and advised for transparent huge
  // pages (for large, streamed-through buffers such as weights).
  void Resize(size_t bytes, bool huge_pages = false, bool zero = true) {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    if (bytes == 0) return;
    const size_t align = huge_pages ? kHugePage : kAlign;
    const size_t rounded = (bytes + align - 1) / align * align;
    data_ = static_cast<uint8_t*>(std::aligned_alloc(align, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    if (huge_pages) madvise(data_, rounded, MADV_HUGEPAGE);  // advisory: failure is harmless
    if (zero) std::memset(data_, 0, rounded);
    size_ = bytes;
  }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data_); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_); }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A std::allocator that hands out 64-byte-aligned storage, for vectors whose data kernels
// stream with full-width vector loads: glibc's malloc aligns to 16 bytes only, and then every
// 64-byte load of a row straddles two cache lines (bench/NOTES.md).
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}  // NOLINT(runtime/explicit)
  T* allocate(size_t n) {
    const size_t bytes = (n * sizeof(T) + AlignedBuffer::kAlign - 1) / AlignedBuffer::kAlign *
                         AlignedBuffer::kAlign;
    void* p = std::aligned_alloc(AlignedBuffer::kAlign, bytes == 0 ? AlignedBuffer::kAlign : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }
  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const noexcept { return true; }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace tarmac
