// libFuzzer target: the log reader (zstd, bzip2 or plain framing), then every message read as
// an Event the way oplog and opreplay walk a log.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "drive/log_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto log = op::drive::ParseLog(std::vector<uint8_t>(data, data + size), "fuzz");
  if (log.ok())
    (void)op::drive::VisitEvents(*log, [](size_t, op::msg::Event::Reader event) {
      (void)op::drive::EventServiceName(event);
      (void)event.getLogMonoTime();
    });
  return 0;
}
