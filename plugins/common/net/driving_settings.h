// The live driving settings of the policy inputs (desire, traffic convention) in the network
// elements: applying the driving-settings event (common/gstopevents.h, with the enums).
#pragma once

#include <gst/gst.h>

#include "common/gstopevents.h"
#include "drive/temporal.h"

// A network element's handling of the driving-settings event (common/gstopevents.h): when
// `event` is one, sets *desire / *traffic under the element's object lock, notifies the changed
// properties ("desire", "traffic-convention") and returns TRUE. A malformed one is logged and
// ignored (FALSE), as is any other event.
gboolean gst_op_apply_driving_settings_event(GstElement *element, GstEvent *event,
                                             op::drive::Desire *desire,
                                             op::drive::TrafficConvention *traffic);
