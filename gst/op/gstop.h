// libgstop: everything GStreamer-facing about OpenCL devices, memory and tensors.
#pragma once

#include "op/gstopbasefilter.h"
#include "op/gstopbufferpool.h"
#include "op/gstopcontext.h"
#include "op/gstoperror.h"
#include "op/gstopframetimer.h"
#include "op/gstopkeepalive.h"
#include "op/gstoplatency.h"
#include "op/gstoplive.h"
#include "op/gstopmemory.h"
#include "op/gstopref.h"
#include "op/gstoptensor.h"
#include "op/gstopupload.h"
