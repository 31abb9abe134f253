// opoverlay: draws the driving model's predictions (path, lane lines, road edges, lead) and,
// optionally, the synthetic drive's ground truth into the road camera video.
#pragma once

#include <gst/base/gstaggregator.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_OP_OVERLAY (gst_op_overlay_get_type())
G_DECLARE_FINAL_TYPE(GstOpOverlay, gst_op_overlay, GST, OP_OVERLAY, GstAggregator)

GST_ELEMENT_REGISTER_DECLARE(opoverlay);

G_END_DECLS
