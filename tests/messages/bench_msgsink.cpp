// Time per frame of opmsgsink (parse, action, three messages, framing, log write and flush),
// on the two-tensor raw output of the element tests.
//
//   bench-msgsink [LOG] [FRAMES]     LOG ending in .zst: zstd level 10 (default: no log)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "msgsink_fixture.h"

int main(int argc, char **argv) {
  if (!msgtest::InitWithLinkedSink(&argc, &argv))
    return 1;
  const char *log = argc > 1 ? argv[1] : nullptr;
  const int frames = argc > 2 ? std::atoi(argv[2]) : 2000;
  msgtest::Layout l = msgtest::MakeLayout();
  std::vector<GstBuffer *> buffers;
  for (int f = 0; f < frames; f++) {
    msgtest::FrameSpec spec;
    spec.frame_id = uint32_t(f);
    spec.pts = f * 50 * GST_MSECOND;
    buffers.push_back(msgtest::MakeBuffer(l, msgtest::RawFrame(l, f), spec));
  }
  double ms = 0;
  {
    msgtest::Sink sink;
    if (log)
      sink.Set("location", log);
    sink.Set("v-ego", "10");
    sink.Start(l);
    auto start = std::chrono::steady_clock::now();
    for (GstBuffer *buffer : buffers)
      if (sink.Push(buffer) != GST_FLOW_OK) {
        std::fprintf(stderr, "bench-msgsink: %s\n", sink.Error().c_str());
        return 1;
      }
    ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("opmsgsink: %d frames, %.3f ms per frame (log: %s)\n", frames, ms / frames,
              log ? log : "none");
  return 0;
}
