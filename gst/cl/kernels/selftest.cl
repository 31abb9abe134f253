// A tiny kernel the OpenCL layer's tests build and run: y = a * x + y over n floats.
__kernel void op_saxpy(__global const float *x, __global float *y, const float a, const int n) {
  const int i = get_global_id(0);
  if (i >= n)
    return;
  y[i] = a * x[i] + y[i];
}
