// op::Status at the GObject edge: one rule from a Status to a GStreamer error, and a macro that
// posts it with the Status's text (code and message) as the debug string.
//
// The caller names the domain and code of what failed (LIBRARY/INIT for a model that does not
// load, STREAM/FAILED for a frame, RESOURCE/WRITE for a log…). One rule refines it: a load or
// initialisation (LIBRARY domain) that failed because its file is missing or unreadable
// (kNotFound, kIoError) is RESOURCE/NOT_FOUND, so an application can tell a wrong path from a
// bad model.
#pragma once

#include <gst/gst.h>

#include "base/status.h"

// The domain and code to post for `status` when the caller would post `domain`/`code`.
void gst_op_status_error_code(const op::Status &status, GQuark domain, gint code,
                              GQuark *out_domain, gint *out_code);

// GST_OP_ELEMENT_ERROR_STATUS(self, status, LIBRARY, INIT, ("Could not load \"%s\".", path))
// posts an element error: the text as given, the debug string status.ToString().
// GST_OP_ELEMENT_WARNING_STATUS does the same for a warning.
#define GST_OP_ELEMENT_ERROR_STATUS(el, status, domain, code, text) \
  GST_OP_ELEMENT_MESSAGE_STATUS(el, GST_MESSAGE_ERROR, status, domain, code, text)
#define GST_OP_ELEMENT_WARNING_STATUS(el, status, domain, code, text) \
  GST_OP_ELEMENT_MESSAGE_STATUS(el, GST_MESSAGE_WARNING, status, domain, code, text)
#define GST_OP_ELEMENT_MESSAGE_STATUS(el, type, status, domain, code, text)                       \
  G_STMT_START {                                                                                  \
    GQuark op_error_domain_ = 0;                                                                  \
    gint op_error_code_ = 0;                                                                      \
    const op::Status &op_error_status_ = (status);                                                \
    gst_op_status_error_code(op_error_status_, GST_##domain##_ERROR, GST_##domain##_ERROR_##code, \
                             &op_error_domain_, &op_error_code_);                                 \
    gchar *op_error_text_ = _gst_element_error_printf text;                                       \
    gchar *op_error_debug_ = g_strdup(op_error_status_.ToString().c_str());                       \
    gst_element_message_full(GST_ELEMENT(el), type, op_error_domain_, op_error_code_,             \
                             op_error_text_, op_error_debug_, __FILE__, GST_FUNCTION, __LINE__);  \
  }                                                                                               \
  G_STMT_END
