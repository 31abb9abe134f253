// opwarp: NV12 camera frames → openpilot model-input tensors (1,12,128,256) uint8, on the device.
#pragma once

#include "op/gstopbasefilter.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_WARP (gst_op_warp_get_type())
G_DECLARE_FINAL_TYPE(GstOpWarp, gst_op_warp, GST, OP_WARP, GstOpBaseFilter)

GST_ELEMENT_REGISTER_DECLARE(opwarp);

G_END_DECLS
