// Log files and wire framing of the driving messages (docs/contract.md, "Wire format").
//
// A message on the wire and in a log is one unpacked Cap'n Proto message in standard flat-array
// framing (what capnp's messageToFlatArray produces). A log is such messages back to back:
// plain, one zstd stream (level 10 with frame checksums, like openpilot's rlog.zst) or, for reading
// old logs, bzip2.
#pragma once

#include <capnp/message.h>
#include <kj/array.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "log.capnp.h"

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

namespace op::drive {

// Serialises a message in flat-array framing into *out (resized; its capacity is reused, so a
// steady stream of similar messages does not allocate).
void SerializeFlat(capnp::MessageBuilder &message, std::vector<uint8_t> *out);

// openpilot's ZMQ bridge port of a service: 8023 + FNV-1a-64(name) mod 57512.
uint16_t BridgePort(const std::string &service);

// The name of the Event union member that is set ("modelV2"), or "unknown(N)" for a
// discriminant this schema does not know (a newer writer).
std::string EventServiceName(op::msg::Event::Reader event);

class LogWriter {
 public:
  // A path ending in ".zst" gets one zstd stream at level 10, anything else plain framing.
  // Fails with IoError naming the path when it cannot be created.
  static StatusOr<std::unique_ptr<LogWriter>> Open(const std::string &path);
  ~LogWriter();
  LogWriter(const LogWriter &) = delete;
  LogWriter &operator=(const LogWriter &) = delete;

  // Appends one whole framed message.
  Status Write(const uint8_t *data, size_t size);
  // Pushes everything written so far to the file as complete data: after a Flush, a reader
  // decodes every message even if the process then dies without Close().
  Status Flush();
  // Ends the zstd stream and closes the file. Idempotent.
  Status Close();

  const std::string &path() const { return path_; }
  bool compressed() const { return zstd_ != nullptr; }

 private:
  LogWriter() = default;
  Status Compress(const uint8_t *data, size_t size, int mode);

  std::string path_;
  std::FILE *file_ = nullptr;
  ZSTD_CCtx *zstd_ = nullptr;
  std::vector<uint8_t> out_buffer_;
};

// The messages of a log, each in its own word-aligned array.
struct LogContents {
  std::vector<kj::Array<capnp::word>> messages;
  // Set when the file ended inside a compressed frame or a message (a writer that died): the
  // messages before that point are still returned.
  bool truncated = false;
  std::string format;  // "zstd", "bzip2" or "plain"
};

// The most a log may hold, on disk or decompressed: 1 GiB, far above a drive's log; a compression
// bomb (a small file that expands to gigabytes) is refused at it.
constexpr size_t kMaxLogBytes = size_t{1} << 30;

// Reads a whole log, choosing the decompressor from the file's magic bytes, not its name. A log
// expanding past kMaxLogBytes, and a zstd frame whose checksum does not match, is Corrupt.
StatusOr<LogContents> ReadLog(const std::string &path);
// The same for bytes already in memory; `path` only names them in errors.
StatusOr<LogContents> ParseLog(std::vector<uint8_t> raw, const std::string &path);

// Calls visit(index, event) for each message in order. A message Cap'n Proto cannot read (a
// pointer out of bounds, a hostile nesting depth) stops the walk with a Corrupt status naming
// its index; its exceptions never leave this function.
Status VisitEvents(const LogContents &log,
                   const std::function<void(size_t, op::msg::Event::Reader)> &visit);

// Splits flat-array framed messages laid end to end. A trailing partial message sets
// *truncated (when given) or, without it, is a Corrupt error naming the offset.
Status SplitMessages(const uint8_t *data, size_t size, std::vector<kj::Array<capnp::word>> *out,
                     bool *truncated);

}  // namespace op::drive
