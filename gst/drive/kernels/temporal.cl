// The policy network's temporal queues as device rings (see gst/drive/temporal.h).
//
// Both kernels run one work-item per float of the network input they write (steps × width) and
// write the newest ring slot in the same pass. Ring slot of the entry `age` frames older than
// the newest: (head − age) mod history, where `head` is the slot of the newest entry.

// Slot of the entry `age` frames before the newest (0 ≤ age < history).
static inline int op_temporal_slot(const int head, const int age, const int history) {
  const int slot = head - age;
  return slot < 0 ? slot + history : slot;
}

// features[s, f] = hidden state `(steps − 1 − s) · skip + lag` frames before the newest. The
// newest (age 0) comes from src and is stored at ring slot `head` by the last step's work-items;
// every other step reads a slot other than `head`, so the write does not race with the reads.
__kernel void op_temporal_features(__global const float *src, __global float *ring,
                                   __global float *features, const int src_offset,
                                   const int features_offset, const int head, const int steps,
                                   const int skip, const int lag, const int width) {
  const int i = get_global_id(0);
  if (i >= steps * width)
    return;
  const int s = i / width;
  const int f = i - s * width;
  const int age = (steps - 1 - s) * skip + lag;
  float v;
  if (s == steps - 1) {
    const float newest = src[src_offset + f];
    ring[head * width + f] = newest;
    v = age == 0 ? newest : ring[op_temporal_slot(head, age, steps * skip) * width + f];
  } else {
    v = ring[op_temporal_slot(head, age, steps * skip) * width + f];
  }
  features[features_offset + i] = v;
}

// pulses[s, j] = max over the entries s·skip … s·skip + skip − 1 of the pulse history (oldest
// first), whose last entry is this frame's pulse: one-hot(pulse_index), or zeros when
// pulse_index < 0. The work-items of the last group store that pulse at ring slot `head`.
// The first two work-items also write traffic[traffic_index] = 1 and the other entry 0.
__kernel void op_temporal_desire(__global float *ring, __global float *pulses,
                                 __global float *traffic, const int pulses_offset,
                                 const int traffic_offset, const int head, const int pulse_index,
                                 const int traffic_index, const int steps, const int skip,
                                 const int width) {
  const int i = get_global_id(0);
  if (i >= steps * width)
    return;
  const int s = i / width;
  const int j = i - s * width;
  const int history = steps * skip;
  const float newest = j == pulse_index ? 1.0f : 0.0f;
  float m = 0.0f;  // pulses are 0 or 1, so 0 is the identity of this max
  for (int k = 0; k < skip; k++) {
    const int age = history - 1 - (s * skip + k);
    const float v = age == 0 ? newest : ring[op_temporal_slot(head, age, history) * width + j];
    m = fmax(m, v);
  }
  if (s == steps - 1)
    ring[head * width + j] = newest;
  pulses[pulses_offset + i] = m;
  if (i < 2)
    traffic[traffic_offset + i] = i == traffic_index ? 1.0f : 0.0f;
}
