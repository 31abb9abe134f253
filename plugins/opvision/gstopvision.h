// opvision: pairs the road and wide tensors by capture time and runs the vision network (or a
// single combined network, with the temporal queues) on the OpenCL device.
#pragma once

#include <gst/base/gstaggregator.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_OP_VISION (gst_op_vision_get_type())
G_DECLARE_FINAL_TYPE(GstOpVision, gst_op_vision, GST, OP_VISION, GstAggregator)

GST_ELEMENT_REGISTER_DECLARE(opvision);

G_END_DECLS
