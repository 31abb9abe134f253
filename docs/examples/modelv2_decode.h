/* A C face for decoding one modelV2 message: Cap'n Proto's API is C++, so the embedding example
 * calls this small function, built alongside it from modelv2_decode.cpp. */
#ifndef OP_EXAMPLE_MODELV2_DECODE_H
#define OP_EXAMPLE_MODELV2_DECODE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t frame_id;
  float desired_curvature;    /* action.desiredCurvature, 1/m */
  float desired_acceleration; /* action.desiredAcceleration, m/s² */
  int valid;                  /* Event.valid: a calibration was seen */
} OpModelV2Summary;

/* Decodes one Event in flat-array framing (the bytes of opmsgsink's "message" signal).
 * Returns 0 and fills *out for a modelV2 Event; -1 for another service; -2 for bytes that are
 * not a valid message (the reason goes to stderr). */
int op_example_decode_model_v2(const uint8_t *data, size_t size, OpModelV2Summary *out);

#ifdef __cplusplus
}
#endif

#endif
