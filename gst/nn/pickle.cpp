// The restricted unpickler (see pickle.h). A small stack machine over a closed set of values.
#include "nn/pickle.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

namespace op::nn {

StatusOr<std::string> DecodeBase64(const std::string &text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+' || c == '-')
      return 62;  // '-' and '_': the URL-safe alphabet, same values
    if (c == '/' || c == '_')
      return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  bool padded = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    if (c == '=') {
      padded = true;
      continue;
    }
    int v = value(c);
    if (v < 0 || padded)
      return InvalidArgument("base64: invalid character in the text");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xffu));
    }
  }
  return out;
}

namespace {

// The values a slices pickle can build.
struct Value {
  enum Kind { kNone, kInt, kStr, kTuple, kDict, kSliceClass, kSlice, kMark } kind = kNone;
  int depth = 1;  // tuples: 1 + the deepest item (values are destroyed recursively)
  int64_t i = 0;
  std::string s;
  std::vector<std::shared_ptr<Value>> items;                         // tuple
  std::vector<std::pair<std::string, std::shared_ptr<Value>>> dict;  // dict, in insertion order
  std::optional<int64_t> start, stop, step;                          // slice
};
using VP = std::shared_ptr<Value>;

const char *KindName(Value::Kind k) {
  switch (k) {
    case Value::kNone:
      return "None";
    case Value::kInt:
      return "int";
    case Value::kStr:
      return "str";
    case Value::kTuple:
      return "tuple";
    case Value::kDict:
      return "dict";
    case Value::kSliceClass:
      return "slice class";
    case Value::kSlice:
      return "slice";
    case Value::kMark:
      return "mark";
  }
  return "?";
}

// Names of opcodes a hostile or unexpected pickle may contain, for the error message.
std::string OpcodeName(uint8_t op) {
  static const std::map<uint8_t, const char *> kNames = {
      {'b', "BUILD"},
      {'i', "INST"},
      {'o', "OBJ"},
      {0x81, "NEWOBJ"},
      {0x92, "NEWOBJ_EX"},
      {'R', "REDUCE"},
      {'c', "GLOBAL"},
      {0x93, "STACK_GLOBAL"},
      {'l', "LIST"},
      {']', "EMPTY_LIST"},
      {'a', "APPEND"},
      {'e', "APPENDS"},
      {'F', "FLOAT"},
      {'G', "BINFLOAT"},
      {'I', "INT"},
      {'L', "LONG"},
      {'S', "STRING"},
      {'T', "BINSTRING"},
      {'U', "SHORT_BINSTRING"},
      {'V', "UNICODE"},
      {'B', "BINBYTES"},
      {'C', "SHORT_BINBYTES"},
      {0x8e, "BINBYTES8"},
      {0x96, "BYTEARRAY8"},
      {'P', "PERSID"},
      {'Q', "BINPERSID"},
      {0x82, "EXT1"},
      {0x83, "EXT2"},
      {0x84, "EXT4"},
      {0x88, "NEWTRUE"},
      {0x89, "NEWFALSE"},
      {0x8b, "LONG4"},
      {0x8f, "EMPTY_SET"},
      {0x90, "ADDITEMS"},
      {0x91, "FROZENSET"},
      {0x97, "NEXT_BUFFER"},
      {0x98, "READONLY_BUFFER"},
      {'0', "POP"},
      {'1', "POP_MARK"},
      {'2', "DUP"},
      {'d', "DICT"},
      {'p', "PUT"},
      {'g', "GET"},
  };
  auto it = kNames.find(op);
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  return it == kNames.end() ? std::string("unknown opcode ") + hex
                            : std::string(it->second) + " (" + hex + ")";
}

class Unpickler {
 public:
  explicit Unpickler(const std::string &data) : d_(data) {}

  StatusOr<VP> Run() {
    while (pos_ < d_.size()) {
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(d_[pos_++]);
      Status s = Step(op, at);
      if (!s.ok())
        return s;
      if (done_) {
        if (stack_.size() != 1)
          return Corrupt("pickle: STOP with a malformed stack");
        return stack_.back();
      }
    }
    return Corrupt("pickle: truncated (no STOP opcode)");
  }

 private:
  Status Need(size_t n) {
    // pos_ <= size always; a length from the file may be anything up to 2^64 - 1, so compare
    // without adding (pos_ + n would wrap).
    if (n > d_.size() - pos_)
      return Corrupt("pickle: truncated inside an opcode's argument");
    return Status::Ok();
  }
  uint64_t ReadLE(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(d_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  StatusOr<VP> Pop() {
    if (stack_.empty() || stack_.back()->kind == Value::kMark)
      return Corrupt("pickle: stack underflow");
    VP v = stack_.back();
    stack_.pop_back();
    return v;
  }
  // Pops everything above the topmost mark (and the mark).
  StatusOr<std::vector<VP>> PopToMark() {
    std::vector<VP> items;
    while (!stack_.empty() && stack_.back()->kind != Value::kMark) {
      items.push_back(stack_.back());
      stack_.pop_back();
    }
    if (stack_.empty())
      return Corrupt("pickle: no MARK on the stack");
    stack_.pop_back();
    std::reverse(items.begin(), items.end());
    return items;
  }
  Status PushString(size_t len) {
    OP_RETURN_IF_ERROR(Need(len));
    auto v = std::make_shared<Value>();
    v->kind = Value::kStr;
    v->s = d_.substr(pos_, len);
    pos_ += len;
    stack_.push_back(v);
    return Status::Ok();
  }
  void PushInt(int64_t i) {
    auto v = std::make_shared<Value>();
    v->kind = Value::kInt;
    v->i = i;
    stack_.push_back(v);
  }
  Status Global(const std::string &module, const std::string &name) {
    if ((module == "builtins" || module == "__builtin__") && name == "slice") {
      auto v = std::make_shared<Value>();
      v->kind = Value::kSliceClass;
      stack_.push_back(v);
      return Status::Ok();
    }
    return InvalidArgument("pickle: refusing GLOBAL " + module + "." + name +
                           " (only builtins.slice is allowed)");
  }
  // A tuple of `items`, refused past kMaxPickleDepth levels or when it would hold a dict (a
  // dict inside a tuple could later be filled with that tuple: a cycle, or a chain of any depth).
  Status PushTuple(std::vector<VP> items) {
    auto v = std::make_shared<Value>();
    v->kind = Value::kTuple;
    for (const VP &item : items) {
      if (item->kind == Value::kDict)
        return InvalidArgument("pickle: a dict inside a tuple (output_slices has none)");
      v->depth = std::max(v->depth, item->depth + 1);
    }
    if (v->depth > kMaxPickleDepth)
      return InvalidArgument("pickle: tuples nested deeper than the limit of " +
                             std::to_string(kMaxPickleDepth) + " levels");
    v->items = std::move(items);
    stack_.push_back(v);
    return Status::Ok();
  }
  Status SetItem(const VP &dict, const VP &key, const VP &value) {
    if (dict->kind != Value::kDict)
      return Corrupt("pickle: SETITEM on a non-dict");
    if (value->kind == Value::kDict)
      return InvalidArgument("pickle: a dict as a dict value (output_slices has none)");
    if (key->kind != Value::kStr)
      return InvalidArgument(std::string("pickle: dict key is a ") + KindName(key->kind) +
                             ", expected str");
    dict->dict.emplace_back(key->s, value);
    return Status::Ok();
  }
  Status Memo(size_t index) {
    if (stack_.empty())
      return Corrupt("pickle: memo of an empty stack");
    memo_[index] = stack_.back();
    return Status::Ok();
  }
  Status Get(size_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end())
      return Corrupt("pickle: memo " + std::to_string(index) + " unset");
    stack_.push_back(it->second);
    return Status::Ok();
  }
  StatusOr<std::optional<int64_t>> Bound(const VP &v) {
    if (v->kind == Value::kNone)
      return std::optional<int64_t>();
    if (v->kind == Value::kInt)
      return std::optional<int64_t>(v->i);
    return InvalidArgument(std::string("pickle: slice bound is a ") + KindName(v->kind));
  }

  Status Step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80:  // PROTO
        OP_RETURN_IF_ERROR(Need(1));
        if (ReadLE(1) > 5)
          return InvalidArgument("pickle: protocol above 5");
        return Status::Ok();
      case 0x95:  // FRAME: only a length hint
        OP_RETURN_IF_ERROR(Need(8));
        ReadLE(8);
        return Status::Ok();
      case '}': {  // EMPTY_DICT
        auto v = std::make_shared<Value>();
        v->kind = Value::kDict;
        stack_.push_back(v);
        return Status::Ok();
      }
      case ')': {  // EMPTY_TUPLE
        auto v = std::make_shared<Value>();
        v->kind = Value::kTuple;
        stack_.push_back(v);
        return Status::Ok();
      }
      case '(': {  // MARK
        auto v = std::make_shared<Value>();
        v->kind = Value::kMark;
        stack_.push_back(v);
        return Status::Ok();
      }
      case 'N':
        stack_.push_back(std::make_shared<Value>());
        return Status::Ok();
      case 'K':
        OP_RETURN_IF_ERROR(Need(1));
        PushInt(static_cast<int64_t>(ReadLE(1)));
        return Status::Ok();
      case 'M':
        OP_RETURN_IF_ERROR(Need(2));
        PushInt(static_cast<int64_t>(ReadLE(2)));
        return Status::Ok();
      case 'J':
        OP_RETURN_IF_ERROR(Need(4));
        PushInt(static_cast<int32_t>(ReadLE(4)));
        return Status::Ok();
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        OP_RETURN_IF_ERROR(Need(1));
        size_t n = ReadLE(1);
        if (n > 8)
          return InvalidArgument("pickle: integer wider than 64 bits");
        OP_RETURN_IF_ERROR(Need(n));
        uint64_t v = ReadLE(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1)
          v |= ~uint64_t{0} << (8 * n);
        PushInt(static_cast<int64_t>(v));
        return Status::Ok();
      }
      case 0x8c:  // SHORT_BINUNICODE
        OP_RETURN_IF_ERROR(Need(1));
        return PushString(ReadLE(1));
      case 'X':  // BINUNICODE
        OP_RETURN_IF_ERROR(Need(4));
        return PushString(ReadLE(4));
      case 0x8d:  // BINUNICODE8
        OP_RETURN_IF_ERROR(Need(8));
        return PushString(ReadLE(8));
      case 0x94:  // MEMOIZE
        return Memo(memo_.size());
      case 'q':
        OP_RETURN_IF_ERROR(Need(1));
        return Memo(ReadLE(1));
      case 'r':
        OP_RETURN_IF_ERROR(Need(4));
        return Memo(ReadLE(4));
      case 'h':
        OP_RETURN_IF_ERROR(Need(1));
        return Get(ReadLE(1));
      case 'j':
        OP_RETURN_IF_ERROR(Need(4));
        return Get(ReadLE(4));
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<VP> items;
        for (int k = 0; k < op - 0x84; ++k) {
          OP_ASSIGN_OR_RETURN(VP item, Pop());
          items.insert(items.begin(), item);
        }
        return PushTuple(std::move(items));
      }
      case 't': {  // TUPLE
        OP_ASSIGN_OR_RETURN(auto items, PopToMark());
        return PushTuple(std::move(items));
      }
      case 's': {  // SETITEM
        OP_ASSIGN_OR_RETURN(VP value, Pop());
        OP_ASSIGN_OR_RETURN(VP key, Pop());
        if (stack_.empty())
          return Corrupt("pickle: SETITEM without a dict");
        return SetItem(stack_.back(), key, value);
      }
      case 'u': {  // SETITEMS
        OP_ASSIGN_OR_RETURN(auto items, PopToMark());
        if (stack_.empty() || items.size() % 2)
          return Corrupt("pickle: malformed SETITEMS");
        for (size_t k = 0; k < items.size(); k += 2)
          OP_RETURN_IF_ERROR(SetItem(stack_.back(), items[k], items[k + 1]));
        return Status::Ok();
      }
      case 'c': {  // GLOBAL "module\nname\n"
        size_t nl1 = d_.find('\n', pos_);
        size_t nl2 = nl1 == std::string::npos ? nl1 : d_.find('\n', nl1 + 1);
        if (nl2 == std::string::npos)
          return Corrupt("pickle: truncated GLOBAL");
        std::string module = d_.substr(pos_, nl1 - pos_);
        std::string name = d_.substr(nl1 + 1, nl2 - nl1 - 1);
        pos_ = nl2 + 1;
        return Global(module, name);
      }
      case 0x93: {  // STACK_GLOBAL
        OP_ASSIGN_OR_RETURN(VP name, Pop());
        OP_ASSIGN_OR_RETURN(VP module, Pop());
        if (name->kind != Value::kStr || module->kind != Value::kStr)
          return Corrupt("pickle: STACK_GLOBAL of non-strings");
        return Global(module->s, name->s);
      }
      case 'R': {  // REDUCE: only slice(*args)
        OP_ASSIGN_OR_RETURN(VP args, Pop());
        OP_ASSIGN_OR_RETURN(VP callable, Pop());
        if (callable->kind != Value::kSliceClass || args->kind != Value::kTuple)
          return InvalidArgument("pickle: refusing REDUCE of a " +
                                 std::string(KindName(callable->kind)) + " (only slice)");
        if (args->items.empty() || args->items.size() > 3)
          return InvalidArgument("pickle: slice takes 1 to 3 arguments");
        auto v = std::make_shared<Value>();
        v->kind = Value::kSlice;
        std::vector<std::optional<int64_t>> b;
        for (const VP &a : args->items) {
          OP_ASSIGN_OR_RETURN(auto x, Bound(a));
          b.push_back(x);
        }
        if (b.size() == 1) {
          v->stop = b[0];
        } else {
          v->start = b[0];
          v->stop = b[1];
          if (b.size() == 3)
            v->step = b[2];
        }
        stack_.push_back(v);
        return Status::Ok();
      }
      case '.':
        done_ = true;
        return Status::Ok();
      default:
        return InvalidArgument("pickle: forbidden opcode " + OpcodeName(op) + " at byte " +
                               std::to_string(at));
    }
  }

  const std::string &d_;
  size_t pos_ = 0;
  bool done_ = false;
  std::vector<VP> stack_;
  std::map<size_t, VP> memo_;
};

}  // namespace

StatusOr<std::vector<OutputSlice>> UnpickleSlices(const std::string &pickle) {
  if (pickle.size() > kMaxPickleBytes)
    return InvalidArgument("pickle: " + std::to_string(pickle.size()) +
                           " bytes, above the limit of " + std::to_string(kMaxPickleBytes));
  Unpickler u(pickle);
  OP_ASSIGN_OR_RETURN(VP root, u.Run());
  if (root->kind != Value::kDict)
    return InvalidArgument(std::string("pickle: top-level value is a ") + KindName(root->kind) +
                           ", expected dict");
  std::vector<OutputSlice> out;
  for (const auto &[name, v] : root->dict) {
    for (const OutputSlice &seen : out)
      if (seen.name == name)
        return InvalidArgument("pickle: slice '" + name + "' is named twice");
    if (v->kind != Value::kSlice)
      return InvalidArgument("pickle: value of '" + name + "' is a " + KindName(v->kind) +
                             ", expected slice");
    if (v->step && *v->step != 1)
      return InvalidArgument("pickle: slice '" + name + "' has a step");
    if (!v->stop || *v->stop < 0 || (v->start && *v->start < 0))
      return InvalidArgument("pickle: slice '" + name + "' has an open or negative bound");
    OutputSlice s{name, v->start.value_or(0), *v->stop};
    if (s.start > s.end)
      return InvalidArgument("pickle: slice '" + name + "' ends before it starts");
    out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const OutputSlice &a, const OutputSlice &b) { return a.start < b.start; });
  return out;
}

StatusOr<std::vector<OutputSlice>> DecodeOutputSlices(const std::string &base64_pickle) {
  OP_ASSIGN_OR_RETURN(std::string raw, DecodeBase64(base64_pickle));
  return UnpickleSlices(raw);
}

}  // namespace op::nn
