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

// A network element's handling of the driving-settings event (common/gstopevents.h): when
// `event` is one, sets *desire / *traffic under the element's object lock, notifies the changed
// properties ("desire", "traffic-convention") and returns TRUE. A malformed one is logged and
// ignored (FALSE), as is any other event.
gboolean gst_op_apply_driving_settings_event(GstElement *element, GstEvent *event,
                                             op::drive::Desire *desire,
                                             op::drive::TrafficConvention *traffic);
