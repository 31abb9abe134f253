// Makes a route folder from the sample drive for the opreplay test: links its two camera files
// and writes rlog.zst with gst/drive's log writer, holding a roadCameraState per frame and a
// liveCalibration at 4 Hz whose rpyCalib changes at a given frame. The road frame ids count from
// FIRST_ID (default 0), as a camera that started earlier or a later segment's do.
//
//   make_route ROUTE_DIR DRIVE_DIR FRAMES CHANGE_FRAME RPY_BEFORE RPY_AFTER [FIRST_ID]
#include <capnp/message.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "drive/camera.h"
#include "drive/log_io.h"

int main(int argc, char **argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr,
                 "usage: make_route ROUTE_DIR DRIVE_DIR FRAMES CHANGE_FRAME RPY_BEFORE RPY_AFTER "
                 "[FIRST_ID]\n");
    return 2;
  }
  const int first_id = argc == 8 ? std::atoi(argv[7]) : 0;
  const std::string route = argv[1], drive = argv[2];
  const int frames = std::atoi(argv[3]), change = std::atoi(argv[4]);
  auto before = op::drive::ParseRpy(argv[5]), after = op::drive::ParseRpy(argv[6]);
  if (!before.ok() || !after.ok()) {
    std::fprintf(stderr, "make_route: bad rpy\n");
    return 2;
  }
  for (const char *name : {"fcamera.hevc", "ecamera.hevc"}) {
    // An absolute target, so the link works from wherever the route folder is.
    char *real = realpath((drive + "/" + name).c_str(), nullptr);
    if (!real) {
      std::perror(("make_route: " + drive + "/" + name).c_str());
      return 1;
    }
    const std::string target = real, link = route + "/" + name;
    std::free(real);
    unlink(link.c_str());
    if (symlink(target.c_str(), link.c_str()) != 0) {
      std::perror(("make_route: " + link).c_str());
      return 1;
    }
  }
  auto writer = op::drive::LogWriter::Open(route + "/rlog.zst");
  if (!writer.ok()) {
    std::fprintf(stderr, "make_route: %s\n", writer.status().ToString().c_str());
    return 1;
  }
  // Boot-clock times like a real log: frame 0 at 1000 s, 50 ms apart.
  const uint64_t t0 = 1000000000000ull, dt = 50000000ull;
  std::vector<uint8_t> bytes;
  for (int i = 0; i < frames; i++) {
    const uint64_t t = t0 + i * dt;
    {
      capnp::MallocMessageBuilder message;
      auto event = message.initRoot<op::msg::Event>();
      event.setLogMonoTime(t);
      auto frame = event.initRoadCameraState();
      frame.setFrameId(first_id + i);
      frame.setTimestampSof(t);
      frame.setTimestampEof(t + 20000000ull);
      op::drive::SerializeFlat(message, &bytes);
      if (!(*writer)->Write(bytes.data(), bytes.size()).ok())
        return 1;
    }
    if (i % 5 == 0) {
      const op::drive::Rpy &rpy = i < change ? *before : *after;
      capnp::MallocMessageBuilder message;
      auto event = message.initRoot<op::msg::Event>();
      event.setLogMonoTime(t);
      auto cal = event.initLiveCalibration();
      auto list = cal.initRpyCalib(3);
      list.set(0, rpy.roll);
      list.set(1, rpy.pitch);
      list.set(2, rpy.yaw);
      cal.initHeight(1).set(0, 1.22f);
      cal.setCalStatus(op::msg::LiveCalibrationData::Status::CALIBRATED);
      op::drive::SerializeFlat(message, &bytes);
      if (!(*writer)->Write(bytes.data(), bytes.size()).ok())
        return 1;
    }
  }
  op::Status st = (*writer)->Close();
  if (!st.ok()) {
    std::fprintf(stderr, "make_route: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
