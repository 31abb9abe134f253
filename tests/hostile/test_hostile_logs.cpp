// Hostile logs: a zstd bomb and corrupted bytes in a log the writer made. Each test writes its
// own hostile file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "drive/log_io.h"

using namespace op::drive;

namespace {

std::string TempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/op-hostile-logs-" + std::to_string(getpid()) + "-" +
         name;
}

void WriteBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> ReadBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// One zstd frame of `blocks` RLE blocks of 128 KiB each (4 bytes per block on disk): 24,576
// blocks are a 98 KB file that expands to 3 GiB.
std::vector<uint8_t> ZstdBomb(uint32_t blocks) {
  std::vector<uint8_t> f = {0x28, 0xb5, 0x2f, 0xfd,  // magic
                            0x00,                    // no content size, no checksum
                            0x38};                   // window 2^17
  const uint32_t block = 128 * 1024;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t last = b + 1 == blocks ? 1 : 0;
    const uint32_t header = (block << 3) | (1u << 1) | last;  // RLE block
    f.push_back(static_cast<uint8_t>(header));
    f.push_back(static_cast<uint8_t>(header >> 8));
    f.push_back(static_cast<uint8_t>(header >> 16));
    f.push_back(0);  // the repeated byte
  }
  return f;
}

// --- 6. a 98 KB zstd file expanding to 3 GiB
TEST(Logs, ZstdBombIsRefusedAtTheLimit) {
  const std::string path = TempPath("bomb.zst");
  const std::vector<uint8_t> bomb = ZstdBomb(24576);
  ASSERT_LT(bomb.size(), 100000u);
  WriteBytes(path, bomb);
  auto log = ReadLog(path);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("expands past the limit of 1073741824"), std::string::npos)
      << log.status().message();
  EXPECT_NE(log.status().message().find(path), std::string::npos);
  std::remove(path.c_str());
}

// A small log of real events, written by LogWriter.
std::vector<uint8_t> EventBytes(uint32_t n) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<op::msg::Event>();
  event.setLogMonoTime(1000 + n);
  auto odo = event.initCameraOdometry();
  odo.setFrameId(n);
  auto trans = odo.initTrans(20);
  for (unsigned i = 0; i < trans.size(); i++)
    trans.set(i, 0.25f * i + static_cast<float>(n));
  std::vector<uint8_t> out;
  SerializeFlat(message, &out);
  return out;
}

std::vector<std::vector<uint8_t>> Messages(const LogContents &log) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto &m : log.messages) {
    auto b = m.asBytes();
    out.emplace_back(b.begin(), b.end());
  }
  return out;
}

// --- 7. a flipped byte in a zstd log never decodes to other messages
TEST(Logs, FlippedByteInAZstdLogIsAnErrorNotOtherMessages) {
  const std::string path = TempPath("good.zst");
  {
    auto w = LogWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (uint32_t n = 0; n < 6; ++n) {
      auto bytes = EventBytes(n);
      ASSERT_TRUE((*w)->Write(bytes.data(), bytes.size()).ok());
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto good = ReadLog(path);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_EQ(good->messages.size(), 6u);
  const auto expected = Messages(*good);
  const std::vector<uint8_t> bytes = ReadBytes(path);
  const std::string bad = TempPath("flipped.zst");
  int silent = 0, refused = 0;
  for (size_t i = 4; i < bytes.size(); ++i) {  // every byte after the magic
    std::vector<uint8_t> b = bytes;
    b[i] ^= 0x10;
    WriteBytes(bad, b);
    auto log = ReadLog(bad);
    if (!log.ok()) {
      ++refused;
      continue;
    }
    if (Messages(*log) != expected && !log->truncated)
      ++silent;
  }
  EXPECT_EQ(silent, 0) << silent << " of " << bytes.size() - 4
                       << " single-byte corruptions decoded to other messages without an error";
  EXPECT_GT(refused, 0);
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

}  // namespace
