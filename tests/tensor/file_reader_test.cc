#include "tensor/file_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace tarmac {
namespace {

std::string TempPath(const char* name) {
  return std::string(::testing::TempDir()) + "/file_reader_" + name + "_" +
         std::to_string(::getpid());
}

TEST(FileReaderTest, ReadsEveryByte) {
  // Past one 64 MiB chunk, and not a multiple of the page or the chunk.
  const size_t size = (size_t{64} << 20) + 4097;
  std::vector<char> bytes(size);
  std::mt19937 rng(3);
  for (char& c : bytes) c = static_cast<char>(rng());
  const std::string path = TempPath("big");
  {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(size));
  }
  for (bool huge : {false, true}) {
    AlignedBuffer buf;
    ASSERT_TRUE(ReadFileInto(path, &buf, huge).ok());
    ASSERT_EQ(buf.size(), size);
    EXPECT_EQ(std::memcmp(buf.data(), bytes.data(), size), 0);
  }
  std::remove(path.c_str());
}

TEST(FileReaderTest, EmptyFileIsEmpty) {
  const std::string path = TempPath("empty");
  { std::ofstream f(path, std::ios::binary); }
  AlignedBuffer buf(64);
  ASSERT_TRUE(ReadFileInto(path, &buf, false).ok());
  EXPECT_EQ(buf.size(), 0u);
  std::remove(path.c_str());
}

TEST(FileReaderTest, ErrorsNameThePath) {
  AlignedBuffer buf;
  const Status missing = ReadFileInto("/nonexistent/model.gguf", &buf, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/nonexistent/model.gguf"), std::string::npos);
  const std::string dir = ::testing::TempDir();
  const Status directory = ReadFileInto(dir, &buf, false);
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace tarmac
