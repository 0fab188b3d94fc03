#include "common/mapped_read.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace gossamer {
namespace {

// A file of `pages` pages mapped read-only, then truncated to one page: reading the second page
// faults with SIGBUS.
struct ShrunkMapping {
  std::string path;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const unsigned char* base = nullptr;
  size_t size = 0;
  explicit ShrunkMapping(int pages) {
    path = testing::TempDir() + "/mapped_read_" + std::to_string(getpid()) + ".bin";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    size = page * static_cast<size_t>(pages);
    const std::vector<unsigned char> bytes(size, 7);
    EXPECT_EQ(::write(fd, bytes.data(), size), static_cast<ssize_t>(size));
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    base = static_cast<const unsigned char*>(p);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(page)), 0);
    ::close(fd);
  }
  ~ShrunkMapping() {
    ::munmap(const_cast<unsigned char*>(base), size);
    ::unlink(path.c_str());
  }
};

TEST(MappedRead, FaultPastTheNewEndIsReportedNotFatal) {
  ShrunkMapping m(4);
  unsigned sum = 0;
  const void* addr = nullptr;
  // The first page is still backed by the file.
  EXPECT_TRUE(guarded_mapped_read([&] { sum += m.base[m.page - 1]; }, &addr));
  EXPECT_EQ(sum, 7u);
  // The third page is not: the read faults and comes back as false with the address.
  const unsigned char* target = m.base + 2 * m.page + 5;
  EXPECT_FALSE(guarded_mapped_read(
      [&] { sum += *static_cast<const volatile unsigned char*>(target); }, &addr));
  EXPECT_EQ(addr, target);
  // Again (the handler stays installed), and nested inside another guarded read.
  bool inner = true;
  EXPECT_TRUE(guarded_mapped_read(
      [&] {
        inner = guarded_mapped_read(
            [&] { sum += *static_cast<const volatile unsigned char*>(m.base + 3 * m.page); },
            &addr);
      },
      nullptr));
  EXPECT_FALSE(inner);
  EXPECT_EQ(addr, m.base + 3 * m.page);
}

TEST(MappedReadDeathTest, FaultOutsideAGuardStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ShrunkMapping m(2);
        guarded_mapped_read([] {}, nullptr);  // the handler is installed
        std::printf("%u\n", *static_cast<const volatile unsigned char*>(m.base + m.page));
      },
      "");
}

}  // namespace
}  // namespace gossamer
