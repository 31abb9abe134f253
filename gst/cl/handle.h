// RAII handles for every OpenCL object: copy retains, destruction releases.
#pragma once

#include <utility>

#include "cl.h"

namespace op::cl {

template <typename T, cl_int (*Retain)(T), cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  // Takes ownership of one reference (what clCreate* returns).
  explicit Handle(T raw) : raw_(raw) {}
  // Adds a reference to an object owned elsewhere.
  static Handle Retained(T raw) {
    if (raw)
      Retain(raw);
    return Handle(raw);
  }
  Handle(const Handle &o) : raw_(o.raw_) {
    if (raw_)
      Retain(raw_);
  }
  Handle(Handle &&o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
  Handle &operator=(Handle o) noexcept {
    std::swap(raw_, o.raw_);
    return *this;
  }
  ~Handle() { reset(); }

  void reset() {
    if (raw_)
      Release(raw_);
    raw_ = nullptr;
  }
  // Gives up ownership of the reference.
  T release() { return std::exchange(raw_, nullptr); }
  T get() const { return raw_; }
  explicit operator bool() const { return raw_ != nullptr; }
  // For clCreate-style out parameters: releases the old object first.
  T *out() {
    reset();
    return &raw_;
  }

 private:
  T raw_ = nullptr;
};

using ContextHandle = Handle<cl_context, clRetainContext, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clRetainCommandQueue, clReleaseCommandQueue>;
using MemHandle = Handle<cl_mem, clRetainMemObject, clReleaseMemObject>;
using ProgramHandle = Handle<cl_program, clRetainProgram, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clRetainKernel, clReleaseKernel>;
using EventHandle = Handle<cl_event, clRetainEvent, clReleaseEvent>;
using SamplerHandle = Handle<cl_sampler, clRetainSampler, clReleaseSampler>;

}  // namespace op::cl
