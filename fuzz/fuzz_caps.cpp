// libFuzzer target: tensor caps, from a caps string to GstOpTensorInfo and back to caps.
#include <gst/gst.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "op/gstoptensor.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  gst_init(nullptr, nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
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
