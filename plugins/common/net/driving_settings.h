// The live driving settings of the policy inputs (desire, traffic convention) as GObject enums,
// for the network elements' properties and the driving-settings event (common/gstopevents.h).
#pragma once

#include <gst/gst.h>

#include "drive/temporal.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_DESIRE (gst_op_desire_get_type())
GType gst_op_desire_get_type(void);
#define GST_TYPE_OP_TRAFFIC_CONVENTION (gst_op_traffic_convention_get_type())
GType gst_op_traffic_convention_get_type(void);

G_END_DECLS
