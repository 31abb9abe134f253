// opclupload: system-memory NV12 frames and tensors into OpenCL memory (one upload).
#pragma once

#include "op/gstopbasefilter.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_CL_UPLOAD (gst_op_cl_upload_get_type())
G_DECLARE_FINAL_TYPE(GstOpClUpload, gst_op_cl_upload, GST, OP_CL_UPLOAD, GstOpBaseFilter)

GST_ELEMENT_REGISTER_DECLARE(opclupload);

G_END_DECLS
