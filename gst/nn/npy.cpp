// .npy reading and writing (see npy.h). The header is a Python dict literal; we read only the
// three keys NumPy writes ('descr', 'fortran_order', 'shape') and refuse anything unexpected.
#include "nn/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace op::nn {
namespace {

const char *Descr(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat16:
      return "<f2";
    case DType::kFloat64:
      return "<f8";
    case DType::kUInt8:
      return "|u1";
    case DType::kInt8:
      return "|i1";
    case DType::kInt32:
      return "<i4";
    case DType::kInt64:
      return "<i8";
    case DType::kBool:
      return "|b1";
    case DType::kUndefined:
      return "";
  }
  return "";
}

// The quoted or bare value after 'key': in the header dict.
bool Field(const std::string &h, const std::string &key, std::string *value) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    return false;
  size_t colon = h.find(':', k);
  if (colon == std::string::npos)
    return false;
  size_t v = h.find_first_not_of(' ', colon + 1);
  if (v == std::string::npos)
    return false;
  size_t end;
  if (h[v] == '\'') {
    end = h.find('\'', v + 1);
    if (end == std::string::npos)
      return false;
    *value = h.substr(v + 1, end - v - 1);
  } else if (h[v] == '(') {
    end = h.find(')', v);
    if (end == std::string::npos)
      return false;
    *value = h.substr(v + 1, end - v - 1);
  } else {
    end = h.find_first_of(",}", v);
    if (end == std::string::npos)
      return false;
    *value = h.substr(v, end - v);
  }
  return true;
}

}  // namespace

StatusOr<Tensor> ParseNpy(const std::string &b, const std::string &what) {
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0)
    return Corrupt(what + ": not a .npy file (bad magic)");
  const int major = static_cast<uint8_t>(b[6]);
  size_t header_len, start;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12)
      return Corrupt(what + ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<uint8_t>(b[8 + i])) << (8 * i);
    start = 12;
  } else {
    return Unsupported(what + ": .npy version " + std::to_string(major) + " is not supported");
  }
  if (start + header_len > b.size())
    return Corrupt(what + ": truncated .npy header");
  const std::string h = b.substr(start, header_len);
  std::string descr, fortran, shape;
  if (!Field(h, "descr", &descr) || !Field(h, "fortran_order", &fortran) ||
      !Field(h, "shape", &shape))
    return Corrupt(what + ": .npy header lacks descr, fortran_order or shape");
  if (fortran != "False")
    return Unsupported(what + ": Fortran-order arrays are not supported");
  Tensor t;
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kUInt8, DType::kInt8,
                  DType::kInt32, DType::kInt64, DType::kBool})
    if (descr == Descr(d))
      t.dtype = d;
  if (descr == "<u1" || descr == "u1")
    t.dtype = DType::kUInt8;
  if (descr == "<b1")
    t.dtype = DType::kBool;
  if (t.dtype == DType::kUndefined)
    return Unsupported(
        what + ": .npy dtype '" + descr +
        "' is not supported (uint8, int8, int32, int64, bool, float16/32/64, little-endian)");
  std::stringstream ss(shape);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t p = item.find_first_not_of(' ');
    if (p == std::string::npos)
      continue;
    char *end = nullptr;
    long long d = std::strtoll(item.c_str() + p, &end, 10);
    if (d < 0 || (*end != '\0' && *end != ' ' && *end != 'L'))
      return Corrupt(what + ": bad .npy shape (" + shape + ")");
    t.shape.dims.push_back(d);
  }
  if (t.shape.NumElements() < 0)
    return Corrupt(what + ": implausibly large .npy shape (" + shape + ")");
  const size_t data_at = start + header_len;
  if (b.size() - data_at != t.ByteSize())
    return Corrupt(what + ": .npy holds " + std::to_string(b.size() - data_at) +
                   " data bytes, shape " + t.shape.ToString() + " of " + DTypeName(t.dtype) +
                   " needs " + std::to_string(t.ByteSize()));
  t.data = std::make_shared<const Bytes>(b.begin() + static_cast<long>(data_at), b.end());
  return t;
}

StatusOr<Tensor> ReadNpy(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return NotFound(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ParseNpy(ss.str(), path);
}

std::string SerializeNpy(const Tensor &t) {
  // Python tuple syntax: "()", "(5,)", "(2, 3)".
  std::string shape;
  for (size_t i = 0; i < t.shape.rank(); ++i)
    shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (t.shape.rank() == 1)
    shape += ",";
  std::string h = "{'descr': '" + std::string(Descr(t.dtype)) +
                  "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Pad with spaces so the data starts at a multiple of 64 bytes, newline last.
  const size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>((h.size() >> 8) & 0xff);
  out += h;
  if (t.data)
    out.append(reinterpret_cast<const char *>(t.data->data()), t.ByteSize());
  return out;
}

Status WriteNpy(const std::string &path, const Tensor &t) {
  if (!t.data || t.data->size() < t.ByteSize())
    return Internal("tensor '" + t.name + "' has no data to write");
  std::ofstream f(path, std::ios::binary);
  if (!f)
    return IoError(path + ": cannot create (" + std::strerror(errno) + ")");
  const std::string bytes = SerializeNpy(t);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f)
    return IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace op::nn
