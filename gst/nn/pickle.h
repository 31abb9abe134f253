// A tiny, safe unpickler for openpilot's `output_slices` metadata: a base64-encoded Python pickle
// of dict[str, slice]. It understands only the opcodes such a pickle needs (protocol 2 to 5:
// dict, str, int, None, tuple, memo, and slice built through GLOBAL/STACK_GLOBAL + REDUCE of
// builtins.slice). Every other opcode, and GLOBAL/REDUCE of anything but slice, is refused with
// an error naming it: a pickle can otherwise run arbitrary code.
#pragma once

#include <string>
#include <vector>

#include "nn/graph.h"

namespace op::nn {

// Limits no real `output_slices` value meets (they are a few hundred bytes, two levels deep).
constexpr size_t kMaxPickleBytes = size_t{1} << 20;
constexpr int kMaxPickleDepth = 32;

// Standard base64 (RFC 4648, '=' padding, whitespace ignored).
StatusOr<std::string> DecodeBase64(const std::string &text);

// Decodes a pickle of dict[str, slice(int, int, None)] into slices (sorted by start). A slice
// with a step, a negative or None bound, start > end or a name used twice is refused, and so is
// a pickle above kMaxPickleBytes or with tuples nested deeper than kMaxPickleDepth.
StatusOr<std::vector<OutputSlice>> UnpickleSlices(const std::string &pickle);

// Both of the above: the value of the `output_slices` metadata key.
StatusOr<std::vector<OutputSlice>> DecodeOutputSlices(const std::string &base64_pickle);

}  // namespace op::nn
