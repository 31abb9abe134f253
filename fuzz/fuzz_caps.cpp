// libFuzzer target: tensor caps, from a caps string to GstOpTensorInfo and back to caps.
#include <gst/gst.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "op/gstoptensor.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  gst_init(nullptr, nullptr);
  return 0;
}

// Deeper nesting than this only exercises GStreamer's recursive value parser, whose leaks on a
// failed parse are suppressed (fuzz/lsan.supp) by naming gst_caps_from_string: past ~100 levels
// the leak's stack outgrows what the sanitizer records (255 frames), the suppression no longer
// sees that frame, and the run would fail on GStreamer's leak. Tensor caps nest two levels.
constexpr int kMaxNesting = 32;

static int Nesting(const std::string &text) {
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '<' || c == '{' || c == '[' || c == '(')
      deepest = std::max(deepest, ++depth);
    else if ((c == '>' || c == '}' || c == ']' || c == ')') && depth > 0)
      --depth;
  }
  return deepest;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  if (Nesting(text) > kMaxNesting)
    return 0;
  GstCaps *caps = gst_caps_from_string(text.c_str());
  if (!caps)
    return 0;
  if (!gst_caps_is_empty(caps) && !gst_caps_is_any(caps)) {
    auto info = gst_op_tensor_info_from_caps(caps);
    if (info.ok() && gst_op_tensor_info_validate(*info).ok()) {
      GstCaps *back = gst_op_tensor_info_to_caps(*info);
      gst_caps_unref(back);
    }
  }
  gst_caps_unref(caps);
  return 0;
}
