// Wire framing, log files and the bridge ports (docs/contract.md, "Wire format"). capnp's own
// messageToFlatArray is the oracle for the framing.
#include <gtest/gtest.h>

#include <bzlib.h>
#include <capnp/serialize.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "drive/log_io.h"

namespace {

using namespace op::drive;
using op::StatusCode;

std::string TempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/op-msg-" + std::to_string(getpid()) + "-" + name;
}

std::vector<uint8_t> ReadBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
}

// An Event whose size depends on n; small first segments force several segments.
void BuildEvent(capnp::MessageBuilder &message, uint32_t n) {
  auto event = message.initRoot<op::msg::Event>();
  event.setLogMonoTime(1000 + n);
  event.setValid(n % 2 == 0);
  auto odo = event.initCameraOdometry();
  odo.setFrameId(n);
  auto trans = odo.initTrans(3 + 50 * n);
  for (unsigned i = 0; i < trans.size(); i++)
    trans.set(i, 0.5f * i + n);
}

std::vector<uint8_t> Reference(capnp::MessageBuilder &message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

TEST(Framing, MatchesMessageToFlatArray) {
  std::vector<uint8_t> buffer;
  for (uint32_t n : {0u, 1u, 7u}) {
    for (unsigned first_segment : {1024u, 2u}) {
      capnp::MallocMessageBuilder message(first_segment, capnp::AllocationStrategy::FIXED_SIZE);
      BuildEvent(message, n);
      SerializeFlat(message, &buffer);
      EXPECT_EQ(buffer, Reference(message))
          << "n " << n << " segments " << message.getSegmentsForOutput().size();
    }
  }
  // Several segments are really exercised (odd and even counts pad the table differently).
  capnp::MallocMessageBuilder message(2, capnp::AllocationStrategy::FIXED_SIZE);
  BuildEvent(message, 7);
  EXPECT_GT(message.getSegmentsForOutput().size(), 2u);
}

TEST(Framing, SplitReadsBackAndRejectsDamage) {
  std::vector<uint8_t> stream, one;
  for (uint32_t n = 0; n < 4; n++) {
    capnp::MallocMessageBuilder message(n == 2 ? 2 : 1024, capnp::AllocationStrategy::FIXED_SIZE);
    BuildEvent(message, n);
    SerializeFlat(message, &one);
    stream.insert(stream.end(), one.begin(), one.end());
  }
  std::vector<kj::Array<capnp::word>> messages;
  ASSERT_TRUE(SplitMessages(stream.data(), stream.size(), &messages, nullptr).ok());
  ASSERT_EQ(messages.size(), 4u);
  for (uint32_t n = 0; n < 4; n++) {
    capnp::FlatArrayMessageReader reader(messages[n]);
    auto event = reader.getRoot<op::msg::Event>();
    EXPECT_EQ(event.getLogMonoTime(), 1000u + n);
    EXPECT_EQ(event.getCameraOdometry().getTrans().size(), 3u + 50 * n);
    EXPECT_EQ(EventServiceName(event), "cameraOdometry");
  }

  // Cut inside the last message: an error naming it, or the whole ones with `truncated`.
  messages.clear();
  auto cut = SplitMessages(stream.data(), stream.size() - 5, &messages, nullptr);
  EXPECT_EQ(cut.code(), StatusCode::kCorrupt);
  EXPECT_NE(cut.message().find("message 3 at byte"), std::string::npos) << cut.message();
  messages.clear();
  bool truncated = false;
  ASSERT_TRUE(SplitMessages(stream.data(), stream.size() - 5, &messages, &truncated).ok());
  EXPECT_TRUE(truncated);
  EXPECT_EQ(messages.size(), 3u);

  // A header claiming a huge segment count is refused, not allocated.
  std::vector<uint8_t> hostile = {0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0};
  messages.clear();
  auto bad = SplitMessages(hostile.data(), hostile.size(), &messages, &truncated);
  EXPECT_EQ(bad.code(), StatusCode::kCorrupt);
  EXPECT_NE(bad.message().find("segments"), std::string::npos);
}

TEST(Bridge, PortsOfTheContract) {
  EXPECT_EQ(BridgePort("modelV2"), 58537);
  EXPECT_EQ(BridgePort("drivingModelData"), 49244);
  EXPECT_EQ(BridgePort("cameraOdometry"), 50972);
}

// Writes n events through a LogWriter at path, flushing after each.
void WriteLog(const std::string &path, uint32_t n, bool close = true) {
  auto writer = LogWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < n; i++) {
    capnp::MallocMessageBuilder message;
    BuildEvent(message, i);
    SerializeFlat(message, &bytes);
    ASSERT_TRUE((*writer)->Write(bytes.data(), bytes.size()).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
  }
  if (close) {
    ASSERT_TRUE((*writer)->Close().ok());
  }
}

void ExpectEvents(const LogContents &log, uint32_t n) {
  ASSERT_EQ(log.messages.size(), n);
  for (uint32_t i = 0; i < n; i++) {
    capnp::FlatArrayMessageReader reader(log.messages[i]);
    EXPECT_EQ(reader.getRoot<op::msg::Event>().getCameraOdometry().getFrameId(), i);
  }
}

TEST(Log, PlainZstdAndBzip2RoundTrip) {
  const std::string plain = TempPath("rlog"), zst = TempPath("rlog.zst");
  WriteLog(plain, 5);
  WriteLog(zst, 5);
  std::vector<uint8_t> plain_bytes = ReadBytes(plain), zst_bytes = ReadBytes(zst);
  ASSERT_GE(zst_bytes.size(), 4u);
  EXPECT_EQ(zst_bytes[0], 0x28);  // zstd frame magic
  EXPECT_LT(zst_bytes.size(), plain_bytes.size());

  auto p = ReadLog(plain);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->format, "plain");
  EXPECT_FALSE(p->truncated);
  ExpectEvents(*p, 5);
  auto z = ReadLog(zst);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(z->format, "zstd");
  EXPECT_FALSE(z->truncated);
  ExpectEvents(*z, 5);

  // bzip2 (old logs), made with libbz2 itself.
  std::vector<char> compressed(plain_bytes.size() * 2 + 600);
  unsigned int compressed_size = compressed.size();
  ASSERT_EQ(BZ2_bzBuffToBuffCompress(compressed.data(), &compressed_size,
                                     reinterpret_cast<char *>(plain_bytes.data()),
                                     plain_bytes.size(), 9, 0, 0),
            BZ_OK);
  const std::string bz2 = TempPath("rlog.bz2");
  WriteBytes(bz2, std::vector<uint8_t>(compressed.begin(), compressed.begin() + compressed_size));
  auto b = ReadLog(bz2);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->format, "bzip2");
  EXPECT_FALSE(b->truncated);
  ExpectEvents(*b, 5);
  // A bzip2 log cut short keeps what decodes and says so.
  WriteBytes(bz2,
             std::vector<uint8_t>(compressed.begin(), compressed.begin() + compressed_size / 2));
  auto bc = ReadLog(bz2);
  ASSERT_TRUE(bc.ok()) << bc.status().ToString();
  EXPECT_TRUE(bc->truncated);
  EXPECT_LT(bc->messages.size(), 5u);
  for (const auto &path : {plain, zst, bz2})
    std::remove(path.c_str());
}

TEST(Log, ZstdStoppedMidStreamStillDecodes) {
  // The file as a killed writer leaves it: everything flushed, the stream never ended.
  const std::string zst = TempPath("live.zst"), copy = TempPath("killed.zst");
  {
    auto writer = LogWriter::Open(zst);
    ASSERT_TRUE(writer.ok());
    std::vector<uint8_t> bytes;
    for (uint32_t i = 0; i < 4; i++) {
      capnp::MallocMessageBuilder message;
      BuildEvent(message, i);
      SerializeFlat(message, &bytes);
      ASSERT_TRUE((*writer)->Write(bytes.data(), bytes.size()).ok());
    }
    ASSERT_TRUE((*writer)->Flush().ok());
    WriteBytes(copy, ReadBytes(zst));
  }  // the destructor ends the stream of the original
  auto killed = ReadLog(copy);
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_TRUE(killed->truncated);
  ExpectEvents(*killed, 4);
  auto closed = ReadLog(zst);
  ASSERT_TRUE(closed.ok());
  EXPECT_FALSE(closed->truncated);
  ExpectEvents(*closed, 4);
  std::remove(zst.c_str());
  std::remove(copy.c_str());
}

TEST(Log, UnreadableMessagesAreCorruptNotCrashes) {
  capnp::MallocMessageBuilder message;
  BuildEvent(message, 3);
  std::vector<uint8_t> bytes;
  SerializeFlat(message, &bytes);
  // The root pointer (first word of the segment, after the 8-byte table) now points far
  // outside the segment.
  const std::string path = TempPath("hostile");
  std::vector<uint8_t> hostile = bytes;
  hostile[8] = 0xfc, hostile[9] = 0xff, hostile[10] = 0xff, hostile[11] = 0x7f;
  std::vector<uint8_t> log_bytes = bytes;
  log_bytes.insert(log_bytes.end(), hostile.begin(), hostile.end());
  WriteBytes(path, log_bytes);
  auto log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();  // the framing itself is fine
  ASSERT_EQ(log->messages.size(), 2u);
  size_t visited = 0;
  op::Status st = VisitEvents(*log, [&](size_t, op::msg::Event::Reader event) {
    visited++;
    EXPECT_EQ(event.getCameraOdometry().getFrameId(), 3u);
  });
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find("message 1 does not decode"), std::string::npos) << st.message();
  EXPECT_EQ(visited, 1u);
  std::remove(path.c_str());
}

TEST(Log, ErrorsNameThePath) {
  auto w = LogWriter::Open("/nonexistent-dir-of-op/rlog.zst");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kIoError);
  EXPECT_NE(w.status().message().find("/nonexistent-dir-of-op/rlog.zst"), std::string::npos);
  auto r = ReadLog("/nonexistent-dir-of-op/rlog");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  // A zstd frame header with its reserved bit set.
  const std::string bad = TempPath("bad.zst");
  WriteBytes(bad, {0x28, 0xb5, 0x2f, 0xfd, 0x08, 0, 0, 0, 0, 0, 0, 0});
  auto c = ReadLog(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(c.status().message().find(bad), std::string::npos);
  std::remove(bad.c_str());
}

}  // namespace
