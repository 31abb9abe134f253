// oppolicy: keeps the temporal queues (features, desire pulses) on the device and runs the
// policy network; outputs the vision and policy tensors together.
#pragma once

#include <gst/gst.h>

#include "op/gstopbasefilter.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_POLICY (gst_op_policy_get_type())
G_DECLARE_FINAL_TYPE(GstOpPolicy, gst_op_policy, GST, OP_POLICY, GstOpBaseFilter)

GST_ELEMENT_REGISTER_DECLARE(oppolicy);

G_END_DECLS
