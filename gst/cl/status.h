// Moved to base/status.h (Status is not OpenCL); this forward stays until every layer includes it.
#pragma once

#include "base/status.h"  // IWYU pragma: export
