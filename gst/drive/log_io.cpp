#include "drive/log_io.h"

#include <bzlib.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_decompressBound (in libzstd since 1.4.10)
#include <zstd.h>

#include <cerrno>
#include <cstring>

namespace op::drive {

namespace {

void PutU32(uint8_t *p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

uint32_t GetU32(const uint8_t *p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

std::string ErrnoText() {
  return std::strerror(errno);
}

// A hostile header could claim billions of segments; real messages have a handful.
constexpr uint32_t kMaxSegments = 512;

StatusOr<std::vector<uint8_t>> ReadFile(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return IoError("cannot open log '" + path + "': " + ErrnoText());
  std::vector<uint8_t> data;
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (n > kMaxLogBytes - data.size()) {
      std::fclose(f);
      return Corrupt("log '" + path + "' is larger than the limit of " +
                     std::to_string(kMaxLogBytes) + " bytes");
    }
    data.insert(data.end(), chunk, chunk + n);
  }
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed)
    return IoError("cannot read log '" + path + "': " + ErrnoText());
  return data;
}

Status TooLarge(const std::string &path, const char *format) {
  return Corrupt(std::string(format) + " log '" + path + "' expands past the limit of " +
                 std::to_string(kMaxLogBytes) + " bytes");
}

// Decompresses a zstd stream (possibly several frames), at most kMaxLogBytes of it. *truncated is
// set when the input ends inside a frame. Frames with a checksum (what LogWriter writes) are
// verified by the decoder: a corrupted byte is an error, not different messages.
Status Unzstd(const std::string &path, const std::vector<uint8_t> &in, std::vector<uint8_t> *out,
              bool *truncated) {
  // Whole frames say how much they can expand to: refuse a bomb before decompressing it.
  const unsigned long long bound = ZSTD_decompressBound(in.data(), in.size());
  if (bound != ZSTD_CONTENTSIZE_ERROR && bound > kMaxLogBytes)
    return TooLarge(path, "zstd");
  ZSTD_DCtx *ctx = ZSTD_createDCtx();
  if (!ctx)
    return Internal("cannot create a zstd decompression context");
  std::vector<uint8_t> buffer(ZSTD_DStreamOutSize());
  ZSTD_inBuffer input = {in.data(), in.size(), 0};
  size_t last = 0;
  while (input.pos < input.size) {
    ZSTD_outBuffer output = {buffer.data(), buffer.size(), 0};
    last = ZSTD_decompressStream(ctx, &output, &input);
    if (ZSTD_isError(last)) {
      std::string why = ZSTD_getErrorName(last);
      ZSTD_freeDCtx(ctx);
      return Corrupt("zstd log '" + path + "' does not decompress at byte " +
                     std::to_string(input.pos) + ": " + why);
    }
    if (output.pos > kMaxLogBytes - out->size()) {
      ZSTD_freeDCtx(ctx);
      return TooLarge(path, "zstd");
    }
    out->insert(out->end(), buffer.data(), buffer.data() + output.pos);
  }
  // Drain what the decoder still holds for the input it has seen (a frame ends with 0).
  while (last != 0) {
    ZSTD_outBuffer output = {buffer.data(), buffer.size(), 0};
    size_t rc = ZSTD_decompressStream(ctx, &output, &input);
    if (ZSTD_isError(rc) || output.pos == 0)
      break;
    if (output.pos > kMaxLogBytes - out->size()) {
      ZSTD_freeDCtx(ctx);
      return TooLarge(path, "zstd");
    }
    last = rc;
    out->insert(out->end(), buffer.data(), buffer.data() + output.pos);
  }
  ZSTD_freeDCtx(ctx);
  *truncated = last != 0;
  return Status::Ok();
}

Status Unbzip2(const std::string &path, const std::vector<uint8_t> &in, std::vector<uint8_t> *out,
               bool *truncated) {
  std::vector<char> buffer(1 << 16);
  size_t pos = 0;
  *truncated = false;
  // Concatenated bzip2 streams (pbzip2, appended logs) decode one after another.
  while (pos < in.size()) {
    bz_stream s;
    std::memset(&s, 0, sizeof(s));
    if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK)
      return Internal("cannot start bzip2 decoding");
    s.next_in = reinterpret_cast<char *>(const_cast<uint8_t *>(in.data() + pos));
    s.avail_in = static_cast<unsigned>(std::min<size_t>(in.size() - pos, 1u << 30));
    int rc = BZ_OK;
    while (rc == BZ_OK) {
      s.next_out = buffer.data();
      s.avail_out = static_cast<unsigned>(buffer.size());
      rc = BZ2_bzDecompress(&s);
      if (buffer.size() - s.avail_out > kMaxLogBytes - out->size()) {
        BZ2_bzDecompressEnd(&s);
        return TooLarge(path, "bzip2");
      }
      out->insert(out->end(), buffer.data(), buffer.data() + (buffer.size() - s.avail_out));
      if (rc == BZ_OK && s.avail_in == 0 && s.avail_out != 0)
        break;  // input ended mid-stream
    }
    size_t consumed = (in.size() - pos) - s.avail_in;
    BZ2_bzDecompressEnd(&s);
    if (rc == BZ_STREAM_END) {
      pos += consumed;
      continue;
    }
    if (rc == BZ_OK) {
      *truncated = true;
      return Status::Ok();
    }
    return Corrupt("bzip2 log '" + path + "' does not decompress at byte " +
                   std::to_string(pos + consumed) + " (bzip2 error " + std::to_string(rc) + ")");
  }
  return Status::Ok();
}

}  // namespace

void SerializeFlat(capnp::MessageBuilder &message, std::vector<uint8_t> *out) {
  auto segments = message.getSegmentsForOutput();
  const size_t n = segments.size();
  const size_t header = ((n + 2) / 2) * sizeof(capnp::word);  // (1 + n) u32, padded to a word
  size_t total = header;
  for (auto &segment : segments)
    total += segment.size() * sizeof(capnp::word);
  out->resize(total);
  uint8_t *p = out->data();
  std::memset(p, 0, header);
  PutU32(p, static_cast<uint32_t>(n - 1));
  for (size_t i = 0; i < n; i++)
    PutU32(p + 4 * (i + 1), static_cast<uint32_t>(segments[i].size()));
  p += header;
  for (auto &segment : segments) {
    std::memcpy(p, segment.begin(), segment.size() * sizeof(capnp::word));
    p += segment.size() * sizeof(capnp::word);
  }
}

uint16_t BridgePort(const std::string &service) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : service) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return static_cast<uint16_t>(8023 + hash % 57512);
}

std::string EventServiceName(op::msg::Event::Reader event) {
  const uint16_t which = static_cast<uint16_t>(event.which());
  for (auto field : capnp::Schema::from<op::msg::Event>().getUnionFields())
    if (field.getProto().getDiscriminantValue() == which)
      return field.getProto().getName();
  return "unknown(" + std::to_string(which) + ")";
}

StatusOr<std::unique_ptr<LogWriter>> LogWriter::Open(const std::string &path) {
  std::unique_ptr<LogWriter> w(new LogWriter());
  w->path_ = path;
  w->file_ = std::fopen(path.c_str(), "wb");
  if (!w->file_)
    return IoError("cannot create log '" + path + "': " + ErrnoText());
  const bool zst = path.size() >= 4 && path.compare(path.size() - 4, 4, ".zst") == 0;
  if (zst) {
    w->zstd_ = ZSTD_createCCtx();
    if (!w->zstd_)
      return Internal("cannot create a zstd compression context");
    size_t rc = ZSTD_CCtx_setParameter(w->zstd_, ZSTD_c_compressionLevel, 10);
    if (ZSTD_isError(rc))
      return Internal(std::string("zstd rejects level 10: ") + ZSTD_getErrorName(rc));
    // A checksum per frame: a reader refuses a corrupted log instead of decoding other messages.
    rc = ZSTD_CCtx_setParameter(w->zstd_, ZSTD_c_checksumFlag, 1);
    if (ZSTD_isError(rc))
      return Internal(std::string("zstd rejects the checksum flag: ") + ZSTD_getErrorName(rc));
    w->out_buffer_.resize(ZSTD_CStreamOutSize());
  }
  return w;
}

LogWriter::~LogWriter() {
  (void)Close();
}

Status LogWriter::Compress(const uint8_t *data, size_t size, int mode) {
  ZSTD_inBuffer input = {data, size, 0};
  const auto directive = static_cast<ZSTD_EndDirective>(mode);
  while (true) {
    ZSTD_outBuffer output = {out_buffer_.data(), out_buffer_.size(), 0};
    size_t remaining = ZSTD_compressStream2(zstd_, &output, &input, directive);
    if (ZSTD_isError(remaining))
      return Internal("zstd compression of '" + path_ +
                      "' failed: " + ZSTD_getErrorName(remaining));
    if (output.pos && std::fwrite(out_buffer_.data(), 1, output.pos, file_) != output.pos)
      return IoError("cannot write log '" + path_ + "': " + ErrnoText());
    // Continue: done when the input is consumed. Flush and end: done when nothing remains.
    bool done = directive == ZSTD_e_continue ? input.pos == input.size : remaining == 0;
    if (done)
      return Status::Ok();
  }
}

Status LogWriter::Write(const uint8_t *data, size_t size) {
  if (!file_)
    return IoError("log '" + path_ + "' is closed");
  if (zstd_)
    return Compress(data, size, ZSTD_e_continue);
  if (std::fwrite(data, 1, size, file_) != size)
    return IoError("cannot write log '" + path_ + "': " + ErrnoText());
  return Status::Ok();
}

Status LogWriter::Flush() {
  if (!file_)
    return IoError("log '" + path_ + "' is closed");
  if (zstd_)
    OP_RETURN_IF_ERROR(Compress(nullptr, 0, ZSTD_e_flush));
  if (std::fflush(file_) != 0)
    return IoError("cannot write log '" + path_ + "': " + ErrnoText());
  return Status::Ok();
}

Status LogWriter::Close() {
  if (!file_)
    return Status::Ok();
  Status status;
  if (zstd_) {
    status = Compress(nullptr, 0, ZSTD_e_end);
    ZSTD_freeCCtx(zstd_);
    zstd_ = nullptr;
  }
  if (std::fclose(file_) != 0 && status.ok())
    status = IoError("cannot close log '" + path_ + "': " + ErrnoText());
  file_ = nullptr;
  return status;
}

Status SplitMessages(const uint8_t *data, size_t size, std::vector<kj::Array<capnp::word>> *out,
                     bool *truncated) {
  size_t pos = 0;
  auto partial = [&](const std::string &why) -> Status {
    if (truncated) {
      *truncated = true;
      return Status::Ok();
    }
    return Corrupt("message " + std::to_string(out->size()) + " at byte " + std::to_string(pos) +
                   " " + why);
  };
  while (pos < size) {
    if (size - pos < 8)
      return partial("is cut short in its segment table");
    const uint32_t count = GetU32(data + pos) + 1;
    if (count == 0 || count > kMaxSegments)
      return Corrupt("message " + std::to_string(out->size()) + " at byte " + std::to_string(pos) +
                     " claims " + std::to_string(static_cast<uint64_t>(GetU32(data + pos)) + 1) +
                     " segments");
    const size_t header = ((count + 2) / 2) * sizeof(capnp::word);
    if (size - pos < header)
      return partial("is cut short in its segment table");
    size_t words = 0;
    for (uint32_t i = 0; i < count; i++)
      words += GetU32(data + pos + 4 * (i + 1));
    const size_t total = header + words * sizeof(capnp::word);
    if (size - pos < total)
      return partial("is cut short in its segments");
    auto message = kj::heapArray<capnp::word>(total / sizeof(capnp::word));
    std::memcpy(message.begin(), data + pos, total);
    out->push_back(std::move(message));
    pos += total;
  }
  return Status::Ok();
}

StatusOr<LogContents> ReadLog(const std::string &path) {
  OP_ASSIGN_OR_RETURN(std::vector<uint8_t> raw, ReadFile(path));
  return ParseLog(std::move(raw), path);
}

StatusOr<LogContents> ParseLog(std::vector<uint8_t> raw, const std::string &path) {
  if (raw.size() > kMaxLogBytes)
    return TooLarge(path, "plain");
  LogContents log;
  std::vector<uint8_t> plain;
  bool cut = false;
  static const uint8_t kZstdMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  if (raw.size() >= 4 && std::memcmp(raw.data(), kZstdMagic, 4) == 0) {
    log.format = "zstd";
    OP_RETURN_IF_ERROR(Unzstd(path, raw, &plain, &cut));
  } else if (raw.size() >= 3 && std::memcmp(raw.data(), "BZh", 3) == 0) {
    log.format = "bzip2";
    OP_RETURN_IF_ERROR(Unbzip2(path, raw, &plain, &cut));
  } else {
    log.format = "plain";
    plain = std::move(raw);
  }
  bool partial = false;
  OP_RETURN_IF_ERROR(SplitMessages(plain.data(), plain.size(), &log.messages, &partial)
                         .Prepend("log '" + path + "'"));
  log.truncated = cut || partial;
  return log;
}

Status VisitEvents(const LogContents &log,
                   const std::function<void(size_t, op::msg::Event::Reader)> &visit) {
  size_t index = 0;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
    for (; index < log.messages.size(); index++) {
      capnp::FlatArrayMessageReader reader(log.messages[index]);
      visit(index, reader.getRoot<op::msg::Event>());
    }
  });
  KJ_IF_MAYBE (e, failure) {
    return Corrupt("message " + std::to_string(index) +
                   " does not decode: " + e->getDescription().cStr());
  }
  return Status::Ok();
}

}  // namespace op::drive
