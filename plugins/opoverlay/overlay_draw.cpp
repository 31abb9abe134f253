#include "overlay_draw.h"

#include <algorithm>
#include <cmath>

namespace op::overlay {

namespace {

// Points closer than this to the camera plane (metres of depth) are not drawn: their projection
// runs off towards infinity and would smear a segment across the whole image.
constexpr double kNearDepth = 0.5;
constexpr int kMaxPolygon = 16;

uint8_t Blend(uint8_t under, uint8_t over, float alpha) {
  const float v = under + (over - under) * alpha;
  return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0f, 255.0f)));
}

}  // namespace

Projector::Projector(const drive::Intrinsics &camera, const drive::Rpy &rpy)
    : kvr_(drive::Multiply(drive::Multiply(camera.K(), drive::ViewFromDevice()),
                           drive::RotationFromRpy(rpy))) {}

bool Projector::Project(double x, double y, double z, double *u, double *v) const {
  if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z))
    return false;
  double q[3];
  for (int r = 0; r < 3; r++)
    q[r] = kvr_[r][0] * x + kvr_[r][1] * y + kvr_[r][2] * z;
  // K's last row is (0, 0, 1), so q[2] is the depth in front of the camera.
  if (!(q[2] > kNearDepth))
    return false;
  *u = q[0] / q[2];
  *v = q[1] / q[2];
  return std::isfinite(*u) && std::isfinite(*v);
}

void FillPolygon(Image &image, const std::array<double, 2> *points, int count, Colour colour) {
  if (count < 3 || count > kMaxPolygon || colour.alpha <= 0.0f || !image.data)
    return;
  const float alpha = std::min(colour.alpha, 1.0f);
  double ymin = points[0][1], ymax = points[0][1];
  for (int i = 1; i < count; i++) {
    ymin = std::min(ymin, points[i][1]);
    ymax = std::max(ymax, points[i][1]);
  }
  // Rows whose pixel centre (row + 0.5) lies in [ymin, ymax), clipped to the image.
  const double row_first = std::max(0.0, std::ceil(ymin - 0.5));
  const double row_last = std::min(image.height - 1.0, std::ceil(ymax - 0.5) - 1.0);
  for (double rowf = row_first; rowf <= row_last; rowf += 1.0) {
    const int row = static_cast<int>(rowf);
    const double yc = row + 0.5;
    double xs[kMaxPolygon];
    int n = 0;
    for (int i = 0; i < count; i++) {
      const auto &a = points[i];
      const auto &b = points[(i + 1) % count];
      // Half-open in y, so a vertex shared by two edges is counted once.
      if ((a[1] <= yc && yc < b[1]) || (b[1] <= yc && yc < a[1]))
        xs[n++] = a[0] + (yc - a[1]) * (b[0] - a[0]) / (b[1] - a[1]);
    }
    std::sort(xs, xs + n);
    uint8_t *line = image.data + static_cast<size_t>(row) * image.stride;
    for (int k = 0; k + 1 < n; k += 2) {
      const double first = std::max(0.0, std::ceil(xs[k] - 0.5));
      const double last = std::min(image.width - 1.0, std::ceil(xs[k + 1] - 0.5) - 1.0);
      for (double colf = first; colf <= last; colf += 1.0) {
        uint8_t *px = line + 4 * static_cast<size_t>(colf);
        px[image.r] = Blend(px[image.r], colour.r, alpha);
        px[image.g] = Blend(px[image.g], colour.g, alpha);
        px[image.b] = Blend(px[image.b], colour.b, alpha);
      }
    }
  }
}

void DrawRibbon(Image &image, const Projector &projector, const float *x, const float *y,
                const float *z, int count, double half_width, double z_offset, double max_x,
                Colour colour) {
  for (int i = 0; i + 1 < count; i++) {
    if (!(x[i] <= max_x) || !(x[i + 1] <= max_x))
      continue;
    std::array<double, 2> quad[4];
    const int ends[4] = {i, i, i + 1, i + 1};
    const double sides[4] = {-half_width, half_width, half_width, -half_width};
    bool visible = true;
    for (int c = 0; c < 4 && visible; c++) {
      const int p = ends[c];
      visible = projector.Project(x[p], y[p] + sides[c], z[p] + z_offset, &quad[c][0], &quad[c][1]);
    }
    if (visible)
      FillPolygon(image, quad, 4, colour);
  }
}

void DrawLead(Image &image, const Projector &projector, double x, double y, double ground_z,
              double width, double height, Colour colour) {
  std::array<double, 2> tri[3];
  if (projector.Project(x, y - width / 2, ground_z, &tri[0][0], &tri[0][1]) &&
      projector.Project(x, y + width / 2, ground_z, &tri[1][0], &tri[1][1]) &&
      projector.Project(x, y, ground_z - height, &tri[2][0], &tri[2][1]))
    FillPolygon(image, tri, 3, colour);
}

}  // namespace op::overlay
