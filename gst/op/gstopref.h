// GstOpRef<T>: RAII for GStreamer references, shaped like op::cl::Handle. Destruction unrefs,
// copies ref, so an early return cannot leak a buffer, caps, event or object.
//
//   GstOpRef<GstBuffer> out(acquired);        // takes the reference (transfer full)
//   auto pool = GstOpRef<GstBufferPool>(gst_aggregator_get_buffer_pool(agg));
//   auto pad = GstOpRef<GstPad>::Ref(borrowed);  // adds a reference (transfer none)
//   *outbuf = out.release();                  // hands the reference on
//
// Mini objects (GstBuffer, GstCaps, GstEvent, GstMemory, GstQuery, GstMessage, GstSample) use
// their own ref/unref; anything else is a GstObject.
#pragma once

#include <gst/gst.h>

#include <utility>

template <typename T>
struct GstOpRefTraits {
  static T *Ref(T *p) { return static_cast<T *>(gst_object_ref(p)); }
  static void Unref(T *p) { gst_object_unref(p); }
};

#define GST_OP_MINI_OBJECT_REF_TRAITS(Type)                                               \
  template <>                                                                             \
  struct GstOpRefTraits<Type> {                                                           \
    static Type *Ref(Type *p) { return (Type *)gst_mini_object_ref(GST_MINI_OBJECT(p)); } \
    static void Unref(Type *p) { gst_mini_object_unref(GST_MINI_OBJECT(p)); }             \
  }
GST_OP_MINI_OBJECT_REF_TRAITS(GstBuffer);
GST_OP_MINI_OBJECT_REF_TRAITS(GstCaps);
GST_OP_MINI_OBJECT_REF_TRAITS(GstEvent);
GST_OP_MINI_OBJECT_REF_TRAITS(GstMemory);
GST_OP_MINI_OBJECT_REF_TRAITS(GstQuery);
GST_OP_MINI_OBJECT_REF_TRAITS(GstMessage);
GST_OP_MINI_OBJECT_REF_TRAITS(GstSample);
#undef GST_OP_MINI_OBJECT_REF_TRAITS

template <typename T>
class GstOpRef {
 public:
  GstOpRef() = default;
  // Takes ownership of one reference.
  explicit GstOpRef(T *raw) : raw_(raw) {}
  // Adds a reference to an object owned elsewhere.
  static GstOpRef Ref(T *raw) { return GstOpRef(raw ? GstOpRefTraits<T>::Ref(raw) : nullptr); }
  GstOpRef(const GstOpRef &o) : raw_(o.raw_ ? GstOpRefTraits<T>::Ref(o.raw_) : nullptr) {}
  GstOpRef(GstOpRef &&o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
  GstOpRef &operator=(GstOpRef o) noexcept {
    std::swap(raw_, o.raw_);
    return *this;
  }
  ~GstOpRef() { reset(); }

  void reset() {
    if (raw_)
      GstOpRefTraits<T>::Unref(raw_);
    raw_ = nullptr;
  }
  // Gives up ownership of the reference.
  T *release() { return std::exchange(raw_, nullptr); }
  T *get() const { return raw_; }
  explicit operator bool() const { return raw_ != nullptr; }
  // For out parameters that return a reference: drops the old one first.
  T **out() {
    reset();
    return &raw_;
  }

 private:
  T *raw_ = nullptr;
};
