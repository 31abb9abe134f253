// The one place OpenCL headers are included, with the target version fixed by the build.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <string>

#include "base/status.h"

namespace op::cl {

// "CL_OUT_OF_RESOURCES" for -5, "CL_UNKNOWN_ERROR(-1234)" for what we do not know.
std::string ErrorName(cl_int err);

// A DeviceError naming the failed call and the OpenCL error: "clBuildProgram: CL_BUILD_...".
Status ClError(const char *call, cl_int err);

}  // namespace op::cl

// Returns a DeviceError Status from the enclosing function when an OpenCL call fails.
#define OP_CL_CHECK(call)                          \
  do {                                             \
    cl_int op_cl_err_ = (call);                    \
    if (op_cl_err_ != CL_SUCCESS)                  \
      return ::op::cl::ClError(#call, op_cl_err_); \
  } while (0)
