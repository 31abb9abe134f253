// Writes the log of the message golden test: three frames of a fixed raw-output tensor (plan
// 4955 and lead 102 wide, slices in a fixed non-trivial order) through the parser, the filler
// and the log writer, exactly as the sink does.
//
//   write-fixed-log OUT [--kill]
// OUT ending in .zst gets one zstd stream. --kill stops like a killed process after the last
// flush: no Close(), so the zstd stream is never ended.
#include <capnp/message.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "drive/fill.h"
#include "drive/log_io.h"
#include "drive/parse.h"

using namespace op::drive;

namespace {

int Fail(const op::Status &status) {
  std::fprintf(stderr, "write-fixed-log: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return 1;
  const bool kill = argc > 2 && std::strcmp(argv[2], "--kill") == 0;
  const std::pair<const char *, size_t> layout[] = {
      {"hidden_state", 512},         {"lead", 102},          {"pose", 12},        {"plan", 4955},
      {"lane_lines", 528},           {"lane_lines_prob", 8}, {"road_edges", 264}, {"lead_prob", 3},
      {"desire_state", 8},           {"desire_pred", 32},    {"meta", 55},        {"pad", 3},
      {"wide_from_device_euler", 6}, {"road_transform", 12},
  };
  SliceTable table;
  size_t size = 0;
  for (const auto &[name, width] : layout) {
    table.push_back({name, size, size + width});
    size += width;
  }
  auto parser = OutputParser::Create(table, size);
  if (!parser.ok())
    return Fail(parser.status());
  auto writer = LogWriter::Open(argv[1]);
  if (!writer.ok())
    return Fail(writer.status());

  MessageFiller filler;
  CarSettings car;
  car.v_ego = 8.0f, car.lat_delay = 0.15f, car.long_delay = 0.3f;
  std::vector<float> raw(size);
  std::vector<uint8_t> bytes;
  for (uint32_t f = 0; f < 3; f++) {
    // Smooth, bounded values that differ from frame to frame; exact in float32 inputs.
    for (size_t i = 0; i < size; i++)
      raw[i] = static_cast<float>(2.0 * std::sin(0.37 * static_cast<double>(i) + 0.9 * f));
    ParsedOutputs out;
    op::Status st = parser->Parse(raw.data(), raw.size(), &out);
    if (!st.ok())
      return Fail(st);
    FrameInfo frame;
    frame.frame_id = 39 + f;
    frame.frame_id_extra = 38 + f;
    frame.dropped_frames = f == 2 ? 1 : 0;
    frame.frame_drop_perc = f == 2 ? 0.5f : 0.0f;
    frame.timestamp_eof = 1000000000ull + 50000000ull * f;
    frame.model_execution_time = 0.025f;
    frame.calibration_seen = f > 0;
    frame.log_mono_time = 2000000000ull + 50000000ull * f;
    if (f == 1)
      car.lane_change_state = op::msg::LaneChangeState::PRE_LANE_CHANGE;
    FrameDecisions d = filler.Step(out, frame, car);
    for (int service = 0; service < 3; service++) {
      capnp::MallocMessageBuilder message;
      auto event = message.initRoot<op::msg::Event>();
      if (service == 0)
        MessageFiller::FillModelV2(event, out, frame, car, d);
      if (service == 1)
        MessageFiller::FillDrivingModelData(event, out, frame, car, d);
      if (service == 2)
        MessageFiller::FillCameraOdometry(event, out, frame);
      SerializeFlat(message, &bytes);
      st = (*writer)->Write(bytes.data(), bytes.size());
      if (!st.ok())
        return Fail(st);
    }
    st = (*writer)->Flush();
    if (!st.ok())
      return Fail(st);
  }
  if (kill)
    _exit(0);  // like SIGKILL after the flush: the stream is never ended
  op::Status st = (*writer)->Close();
  return st.ok() ? 0 : Fail(st);
}
