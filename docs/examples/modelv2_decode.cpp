// The C++ half of the embedding example: one Event (flat-array framing) → the fields it prints.
#include "modelv2_decode.h"

#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstdio>
#include <cstring>

#include "log.capnp.h"

int op_example_decode_model_v2(const uint8_t *data, size_t size, OpModelV2Summary *out) {
  if (size % sizeof(capnp::word) != 0) {
    std::fprintf(stderr, "decode: %zu bytes is not a whole number of words\n", size);
    return -2;
  }
  // Signal bytes carry no alignment promise; Cap'n Proto reads words in place, so copy once.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(words.begin(), data, size);
  int result = -2;
  // A malformed message is reported by exception; none may cross into C.
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    capnp::FlatArrayMessageReader reader(words);
    op::msg::Event::Reader event = reader.getRoot<op::msg::Event>();
    if (event.which() != op::msg::Event::MODEL_V2) {
      result = -1;
      return;
    }
    op::msg::ModelDataV2::Reader model = event.getModelV2();
    out->frame_id = model.getFrameId();
    out->desired_curvature = model.getAction().getDesiredCurvature();
    out->desired_acceleration = model.getAction().getDesiredAcceleration();
    out->valid = event.getValid() ? 1 : 0;
    result = 0;
  });
  KJ_IF_MAYBE (e, error) {
    std::fprintf(stderr, "decode: %s\n", e->getDescription().cStr());
    return -2;
  }
  return result;
}
