// Drawing the model's view of the road into a camera image, without GStreamer.
//
// Points are in openpilot's calibrated car frame (x forward, y right, z down, origin at the
// camera), the frame the driving model's plan, lane lines, road edges and leads are given in.
// They reach the camera image through the same chain opwarp's warp matrix is made of:
// pixel ~ K_cam · V · R(rpy) · p (gst/drive/camera.h), so a drawing lines up with what the model
// was shown.
#pragma once

#include <array>
#include <cstdint>

#include "drive/camera.h"

namespace op::overlay {

struct Colour {
  uint8_t r = 0, g = 0, b = 0;
  float alpha = 1.0f;  // 0 transparent .. 1 opaque
};

// A 4-bytes-per-pixel image in memory the caller owns (BGRx, RGBA, ...): the byte offsets of
// red, green and blue inside a pixel say which. The fourth byte is left alone.
struct Image {
  uint8_t *data = nullptr;
  int width = 0;
  int height = 0;
  int stride = 0;  // bytes per row
  int r = 0, g = 1, b = 2;
};

class Projector {
 public:
  Projector(const drive::Intrinsics &camera, const drive::Rpy &rpy);
  // The camera pixel of a calibrated-frame point; false when it is behind (or nearly at) the
  // camera plane, where a projection would flip or blow up.
  bool Project(double x, double y, double z, double *u, double *v) const;

 private:
  drive::Mat3 kvr_{};  // K · V · R(rpy)
};

// Fills a simple polygon (pixel centres inside it, left and top edges included, right and bottom
// excluded, so polygons sharing an edge blend each pixel once), clipped to the image.
void FillPolygon(Image &image, const std::array<double, 2> *points, int count, Colour colour);

// A ribbon on a 3-D polyline of `count` points: at each point it spans y ± half_width, and every
// segment is filled as one projected quad. Points are (x[i], y[i], z[i] + z_offset); a segment
// is drawn when both ends are finite, in front of the camera and no further than max_x ahead.
void DrawRibbon(Image &image, const Projector &projector, const float *x, const float *y,
                const float *z, int count, double half_width, double z_offset, double max_x,
                Colour colour);

// A lead marker: an upright triangle standing on the ground (z = ground_z) at (x, y), `width`
// metres wide at its base and `height` metres tall.
void DrawLead(Image &image, const Projector &projector, double x, double y, double ground_z,
              double width, double height, Colour colour);

}  // namespace op::overlay
