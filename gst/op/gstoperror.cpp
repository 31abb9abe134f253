#include "op/gstoperror.h"

void gst_op_status_error_code(const op::Status &status, GQuark domain, gint code,
                              GQuark *out_domain, gint *out_code) {
  *out_domain = domain;
  *out_code = code;
  const bool missing =
      status.code() == op::StatusCode::kNotFound || status.code() == op::StatusCode::kIoError;
  if (missing && domain == GST_LIBRARY_ERROR) {
    *out_domain = GST_RESOURCE_ERROR;
    *out_code = GST_RESOURCE_ERROR_NOT_FOUND;
  }
}
