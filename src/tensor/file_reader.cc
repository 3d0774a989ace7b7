#include "tensor/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tarmac {

Status ReadFileInto(const std::string& path, AlignedBuffer* out, bool huge_pages,
                    const std::function<void(uint64_t done, uint64_t total)>& on_read) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open '{}': {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError("cannot stat '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return IoError("'{}' is not a regular file", path);
  const size_t size = static_cast<size_t>(st.st_size);
  out->Resize(size, huge_pages, /*zero=*/false);
  // Chunks of 64 MiB: read(2) returns at most ~2 GiB at a time anyway.
  constexpr size_t kChunk = size_t{64} << 20;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out->data() + done, std::min(kChunk, size - done),
                              static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot read '{}' at byte {}: {}", path, done, std::strerror(errno));
    }
    if (n == 0) {
      return IoError("'{}' ended at byte {} of {} while being read (was it changed?)", path,
                     done, size);
    }
    done += static_cast<size_t>(n);
    if (on_read) on_read(done, size);
  }
  return Status::Ok();
}

}  // namespace tarmac
