// libgstop.so: registers the elements; nothing else happens at load time (no device probing).
#include <gst/gst.h>

#include "opcldownload/gstopcldownload.h"
#include "opclupload/gstopclupload.h"
#include "opmsgsink/gstopmsgsink.h"
#include "opoverlay/gstopoverlay.h"
#include "oppolicy/gstoppolicy.h"
#include "opvision/gstopvision.h"
#include "opwarp/gstopwarp.h"

static gboolean plugin_init(GstPlugin *plugin) {
  gboolean ok = FALSE;
  ok |= GST_ELEMENT_REGISTER(opclupload, plugin);
  ok |= GST_ELEMENT_REGISTER(opcldownload, plugin);
  ok |= GST_ELEMENT_REGISTER(opvision, plugin);
  ok |= GST_ELEMENT_REGISTER(oppolicy, plugin);
  ok |= GST_ELEMENT_REGISTER(opwarp, plugin);
  ok |= GST_ELEMENT_REGISTER(opoverlay, plugin);
  ok |= GST_ELEMENT_REGISTER(opmsgsink, plugin);
  return ok;
}

#define PACKAGE "gst-op"
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, op,
                  "openpilot's driving model as OpenCL GStreamer elements", plugin_init, "0.1.0",
                  "MIT/X11", "gst-op", "Unknown package origin")
