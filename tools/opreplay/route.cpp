// Routes laid out like openpilot's (see route.h).
#include "route.h"

#include <glib/gstdio.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

namespace op::replay {
namespace {

bool IsFile(const std::string &path) {
  return g_file_test(path.c_str(), G_FILE_TEST_IS_REGULAR);
}
bool IsDir(const std::string &path) {
  return g_file_test(path.c_str(), G_FILE_TEST_IS_DIR);
}

std::string Basename(const std::string &path) {
  gchar *b = g_path_get_basename(path.c_str());
  std::string s = b;
  g_free(b);
  return s;
}

std::string Dirname(const std::string &path) {
  gchar *d = g_path_get_dirname(path.c_str());
  std::string s = d;
  g_free(d);
  return s;
}

// Splits "<name>--<n>" (n decimal) into name and n; false for anything else.
bool ParseSegmentName(const std::string &folder, std::string *name, int *number) {
  const size_t sep = folder.rfind("--");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= folder.size() ||
      folder.size() - sep - 2 > 6)
    return false;
  int n = 0;
  for (size_t i = sep + 2; i < folder.size(); i++) {
    if (folder[i] < '0' || folder[i] > '9')
      return false;
    n = n * 10 + (folder[i] - '0');
  }
  *name = folder.substr(0, sep);
  *number = n;
  return true;
}

// The segment folders of DIR, by route name and number.
std::map<std::string, std::map<int, std::string>> SegmentFolders(const std::string &dir) {
  std::map<std::string, std::map<int, std::string>> routes;
  GDir *d = g_dir_open(dir.c_str(), 0, nullptr);
  if (!d)
    return routes;
  while (const gchar *entry = g_dir_read_name(d)) {
    std::string name;
    int number = 0;
    const std::string full = dir + "/" + entry;
    if (ParseSegmentName(entry, &name, &number) && IsDir(full))
      routes[name][number] = full;
  }
  g_dir_close(d);
  return routes;
}

// Checks a segment's files and counts its pictures; sets segment->error on a failed check.
void CheckSegment(Segment *segment) {
  const std::string &dir = segment->dir;
  segment->road = dir + "/fcamera.hevc";
  if (!IsFile(segment->road)) {
    segment->error = "no fcamera.hevc in " + dir;
    return;
  }
  auto frames = CountHevcPictures(segment->road);
  if (!frames.ok()) {
    segment->error = frames.status().message();
    return;
  }
  segment->frames = *frames;
  if (IsFile(dir + "/ecamera.hevc")) {
    segment->wide = dir + "/ecamera.hevc";
    auto wide = CountHevcPictures(segment->wide);
    if (!wide.ok()) {
      segment->error = wide.status().message();
      return;
    }
    segment->wide_frames = *wide;
  }
  for (const char *name : {"rlog", "rlog.zst", "rlog.bz2"}) {
    const std::string path = dir + "/" + name;
    if (!IsFile(path))
      continue;
    auto state = opreplay::ReadRouteState(path);
    if (!state.ok()) {
      segment->error = "cannot read the log " + path + ": " + state.status().message();
      return;
    }
    segment->log = path;
    segment->state = std::move(*state);
    break;
  }
}

}  // namespace

StatusOr<guint64> CountHevcPictures(const std::string &path) {
  gchar *data = nullptr;
  gsize size = 0;
  GError *error = nullptr;
  if (!g_file_get_contents(path.c_str(), &data, &size, &error)) {
    std::string why = error->message;
    g_error_free(error);
    return IoError("cannot read " + path + ": " + why);
  }
  const auto *b = reinterpret_cast<const uint8_t *>(data);
  auto fail = [&](const std::string &why) -> StatusOr<guint64> {
    g_free(data);
    return Corrupt(path + ": " + why);
  };
  if (size == 0)
    return fail("the file is empty");
  // Annex B: NAL units after 00 00 01 (or 00 00 00 01) start codes.
  auto start_code_at = [&](size_t i) {
    return i + 3 <= size && b[i] == 0 && b[i + 1] == 0 && b[i + 2] == 1;
  };
  if (!start_code_at(0) && !(size >= 4 && b[0] == 0 && start_code_at(1)))
    return fail("not an HEVC byte stream (no start code at the beginning)");
  bool vps = false, sps = false, pps = false;
  guint64 pictures = 0;
  for (size_t i = 0; i + 3 < size; i++) {
    if (!start_code_at(i))
      continue;
    i += 3;
    if (i + 2 >= size)
      break;
    if (b[i] & 0x80)
      return fail("a NAL unit header at byte " + std::to_string(i) + " has its forbidden bit set");
    const int type = (b[i] >> 1) & 0x3f;
    if (type == 32)
      vps = true;
    else if (type == 33)
      sps = true;
    else if (type == 34)
      pps = true;
    else if (type < 32 && (b[i + 2] & 0x80)) {  // a slice that starts a picture
      if (pictures == 0) {
        if (!vps || !sps || !pps)
          return fail("no VPS/SPS/PPS before the first picture");
        if (type < 16 || type > 23)
          return fail("the first picture is not a key frame (NAL type " + std::to_string(type) +
                      ")");
      }
      pictures++;
    }
  }
  g_free(data);
  if (pictures == 0)
    return Corrupt(path + ": holds no picture");
  return pictures;
}

guint64 Stretch::frames() const {
  guint64 n = 0;
  for (const Segment *s : segments)
    n += s->frames;
  return n;
}

StatusOr<Route> OpenRoute(const std::string &path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  Route route;
  route.path = path;
  if (IsFile(path + "/fcamera.hevc")) {
    Segment s;
    s.number = 0;
    s.dir = path;
    CheckSegment(&s);
    route.segments.push_back(s);
    return route;
  }
  std::map<int, std::string> folders;
  auto inside = SegmentFolders(path);
  if (inside.size() > 1)
    return InvalidArgument(path + " holds segments of " + std::to_string(inside.size()) +
                           " routes (" + inside.begin()->first + ", " +
                           std::next(inside.begin())->first + ", ...): give one route");
  if (inside.size() == 1) {
    folders = inside.begin()->second;
  } else {
    auto beside = SegmentFolders(Dirname(path));
    auto it = beside.find(Basename(path));
    if (it != beside.end())
      folders = it->second;
  }
  if (folders.empty())
    return NotFound(path +
                    " is not a route: no fcamera.hevc in it, no segment folders <route>--<n> "
                    "in it and none named " +
                    Basename(path) + "--<n> beside it");
  route.segmented = true;
  const int last = folders.rbegin()->first;
  for (int n = 0; n <= last; n++) {
    Segment s;
    s.number = n;
    auto it = folders.find(n);
    if (it == folders.end()) {
      s.error = "segment " + std::to_string(n) + " is missing";
    } else {
      s.dir = it->second;
      CheckSegment(&s);
    }
    route.segments.push_back(s);
  }
  // Route frame indices. A segment that cannot be read is assumed as long as the good segment
  // before it (openpilot's segments all have the same length but the last), else after it.
  guint64 next = 0;
  for (size_t i = 0; i < route.segments.size(); i++) {
    Segment &s = route.segments[i];
    s.first_frame = next;
    guint64 length = s.frames;
    if (!s.error.empty()) {
      length = 0;
      for (size_t j = i; j-- > 0 && !length;)
        if (route.segments[j].error.empty())
          length = route.segments[j].frames;
      for (size_t j = i + 1; j < route.segments.size() && !length; j++)
        if (route.segments[j].error.empty())
          length = route.segments[j].frames;
      if (!length)
        length = kNominalSegmentFrames;
    }
    next += length;
  }
  return route;
}

std::vector<Stretch> Stretches(const Route &route) {
  std::vector<Stretch> out;
  bool open = false;
  for (const Segment &s : route.segments) {
    if (!s.error.empty()) {
      open = false;
      continue;
    }
    if (!open) {
      out.emplace_back();
      out.back().wide = true;
      open = true;
    }
    out.back().segments.push_back(&s);
    out.back().wide = out.back().wide && !s.wide.empty();
  }
  return out;
}

opreplay::RouteState StretchState(const Stretch &stretch) {
  opreplay::RouteState joined;
  for (const Segment *s : stretch.segments) {
    opreplay::AppendState(s->state, s->first_frame * kFrameNs, &joined);
    for (auto [logged, frames, out] : {std::tuple{&s->state.road, s->frames, &joined.road},
                                       std::tuple{&s->state.wide, s->wide_frames, &joined.wide}}) {
      for (guint64 k = 0; k < frames; k++)
        out->push_back(k < logged->size() ? (*logged)[k] : opreplay::CameraFrame{0, 0, 0, false});
    }
  }
  // A stretch without any camera state leaves the frame ids to opwarp entirely.
  for (auto *frames : {&joined.road, &joined.wide})
    if (std::none_of(frames->begin(), frames->end(),
                     [](const opreplay::CameraFrame &f) { return f.logged; }))
      frames->clear();
  return joined;
}

std::string StretchSourceDescription(const std::string &name) {
  // Bytes like filesrc's, so h265parse sees one continuous byte stream.
  return "appsrc name=" + name + " format=bytes stream-type=stream";
}

namespace {

struct Feeder {
  std::vector<std::string> files;
  size_t next = 0;
  bool ended = false;
};

// appsrc's need-data: the next segment's whole file as one buffer (h265parse splits it), then
// the end of the stream. Runs once per segment, not per frame.
void OnNeedData(GstElement *src, guint, gpointer data) {
  auto *feeder = static_cast<Feeder *>(data);
  GstFlowReturn flow = GST_FLOW_OK;
  if (feeder->ended)
    return;
  if (feeder->next >= feeder->files.size()) {
    feeder->ended = true;
    g_signal_emit_by_name(src, "end-of-stream", &flow);
    return;
  }
  const std::string &path = feeder->files[feeder->next++];
  gchar *bytes = nullptr;
  gsize size = 0;
  GError *error = nullptr;
  if (!g_file_get_contents(path.c_str(), &bytes, &size, &error)) {
    GST_ELEMENT_ERROR(src, RESOURCE, READ, ("Could not read %s.", path.c_str()),
                      ("%s", error->message));
    g_error_free(error);
    feeder->ended = true;
    return;
  }
  GstBuffer *buf = gst_buffer_new_wrapped(bytes, size);
  g_signal_emit_by_name(src, "push-buffer", buf, &flow);
  gst_buffer_unref(buf);
}

struct Shift {
  guint64 offset_ns = 0;
  guint64 next_frame = 0;
};

GstPadProbeReturn ShiftProbe(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *shift = static_cast<Shift *>(data);
  // The decoder hands its only reference on: making it writable copies nothing.
  GstBuffer *buf = gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
  if (GST_BUFFER_PTS_IS_VALID(buf))
    GST_BUFFER_PTS(buf) += shift->offset_ns;
  if (GST_BUFFER_DTS_IS_VALID(buf))
    GST_BUFFER_DTS(buf) += shift->offset_ns;
  GST_BUFFER_OFFSET(buf) = shift->next_frame++;
  GST_PAD_PROBE_INFO_DATA(info) = buf;
  return GST_PAD_PROBE_OK;
}

}  // namespace

Status AttachStretchSource(GstBin *bin, const std::string &name, const std::string &decoder,
                           const Stretch &stretch, const std::string &camera) {
  GstElement *src = gst_bin_get_by_name(bin, name.c_str());
  GstElement *dec = gst_bin_get_by_name(bin, decoder.c_str());
  if (!src || !dec) {
    if (src)
      gst_object_unref(src);
    if (dec)
      gst_object_unref(dec);
    return Internal("the pipeline has no " + name + " or " + decoder);
  }
  auto *feeder = new Feeder;
  for (const Segment *s : stretch.segments)
    feeder->files.push_back(camera == "wide" ? s->wide : s->road);
  g_signal_connect_data(
      src, "need-data", G_CALLBACK(OnNeedData), feeder,
      [](gpointer data, GClosure *) { delete static_cast<Feeder *>(data); }, GConnectFlags(0));
  auto *shift = new Shift{stretch.first_frame() * kFrameNs, stretch.first_frame()};
  GstPad *pad = gst_element_get_static_pad(dec, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, ShiftProbe, shift,
                    [](gpointer data) { delete static_cast<Shift *>(data); });
  gst_object_unref(pad);
  gst_object_unref(src);
  gst_object_unref(dec);
  return Status::Ok();
}

}  // namespace op::replay
