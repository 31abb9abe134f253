// opcldownload: OpenCL-memory NV12 frames and tensors back to system memory.
#pragma once

#include "op/gstopbasefilter.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_CL_DOWNLOAD (gst_op_cl_download_get_type())
G_DECLARE_FINAL_TYPE(GstOpClDownload, gst_op_cl_download, GST, OP_CL_DOWNLOAD, GstOpBaseFilter)

GST_ELEMENT_REGISTER_DECLARE(opcldownload);

G_END_DECLS
