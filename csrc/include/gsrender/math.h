// Tiny fixed-size vector/matrix helpers shared by the CPU and CUDA backends. Templated on the
// scalar so the CPU kernels run in float32 (like the GPU) and float64 (for gradcheck).
// Matrices are row-major: m[row][col].
#pragma once

#include <cmath>

#include "gsrender/common.h"

namespace gsrender {

template <typename T>
struct Vec2 {
  T x, y;
};

template <typename T>
struct Vec3 {
  T x, y, z;
};

template <typename T>
struct Vec4 {
  T w, x, y, z;  // quaternion order (wxyz)
};

template <typename T>
struct Mat3 {
  T m[3][3];
};

template <typename T>
GSR_HOST_DEVICE Vec3<T> operator+(const Vec3<T>& a, const Vec3<T>& b) {
  return {a.x + b.x, a.y + b.y, a.z + b.z};
}

template <typename T>
GSR_HOST_DEVICE Vec3<T> operator-(const Vec3<T>& a, const Vec3<T>& b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}

template <typename T>
GSR_HOST_DEVICE Vec3<T> operator*(T s, const Vec3<T>& a) {
  return {s * a.x, s * a.y, s * a.z};
}

template <typename T>
GSR_HOST_DEVICE T dot(const Vec3<T>& a, const Vec3<T>& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}

template <typename T>
GSR_HOST_DEVICE Mat3<T> mat3_zero() {
  Mat3<T> r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r.m[i][j] = T(0);
  return r;
}

template <typename T>
GSR_HOST_DEVICE Mat3<T> transpose(const Mat3<T>& a) {
  Mat3<T> r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r.m[i][j] = a.m[j][i];
  return r;
}

template <typename T>
GSR_HOST_DEVICE Mat3<T> operator*(const Mat3<T>& a, const Mat3<T>& b) {
  Mat3<T> r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      r.m[i][j] = a.m[i][0] * b.m[0][j] + a.m[i][1] * b.m[1][j] + a.m[i][2] * b.m[2][j];
  return r;
}

template <typename T>
GSR_HOST_DEVICE Mat3<T> operator+(const Mat3<T>& a, const Mat3<T>& b) {
  Mat3<T> r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r.m[i][j] = a.m[i][j] + b.m[i][j];
  return r;
}

template <typename T>
GSR_HOST_DEVICE Mat3<T> operator*(T s, const Mat3<T>& a) {
  Mat3<T> r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r.m[i][j] = s * a.m[i][j];
  return r;
}

// a · v
template <typename T>
GSR_HOST_DEVICE Vec3<T> operator*(const Mat3<T>& a, const Vec3<T>& v) {
  return {a.m[0][0] * v.x + a.m[0][1] * v.y + a.m[0][2] * v.z,
          a.m[1][0] * v.x + a.m[1][1] * v.y + a.m[1][2] * v.z,
          a.m[2][0] * v.x + a.m[2][1] * v.y + a.m[2][2] * v.z};
}

// aᵀ · v
template <typename T>
GSR_HOST_DEVICE Vec3<T> mul_transposed(const Mat3<T>& a, const Vec3<T>& v) {
  return {a.m[0][0] * v.x + a.m[1][0] * v.y + a.m[2][0] * v.z,
          a.m[0][1] * v.x + a.m[1][1] * v.y + a.m[2][1] * v.z,
          a.m[0][2] * v.x + a.m[1][2] * v.y + a.m[2][2] * v.z};
}

// a bᵀ
template <typename T>
GSR_HOST_DEVICE Mat3<T> outer(const Vec3<T>& a, const Vec3<T>& b) {
  Mat3<T> r;
  const T av[3] = {a.x, a.y, a.z};
  const T bv[3] = {b.x, b.y, b.z};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r.m[i][j] = av[i] * bv[j];
  return r;
}

template <typename T>
GSR_HOST_DEVICE Vec3<T> load_vec3(const T* p) {
  return {p[0], p[1], p[2]};
}

template <typename T>
GSR_HOST_DEVICE void store_vec3(T* p, const Vec3<T>& v) {
  p[0] = v.x;
  p[1] = v.y;
  p[2] = v.z;
}

// Overloads so templated code calls the right precision on host and device.
GSR_HOST_DEVICE float gsr_sqrt(float x) { return sqrtf(x); }
GSR_HOST_DEVICE double gsr_sqrt(double x) { return sqrt(x); }
GSR_HOST_DEVICE float gsr_log(float x) { return logf(x); }
GSR_HOST_DEVICE double gsr_log(double x) { return log(x); }
GSR_HOST_DEVICE float gsr_ceil(float x) { return ceilf(x); }
GSR_HOST_DEVICE double gsr_ceil(double x) { return ceil(x); }

template <typename T>
GSR_HOST_DEVICE T gsr_min(T a, T b) {
  return a < b ? a : b;
}

template <typename T>
GSR_HOST_DEVICE T gsr_max(T a, T b) {
  return a > b ? a : b;
}

// m ? a : b, as an expression: the shared templates take both sides and select, so the CPU's
// lane types (cpu::LaneF, whose comparisons give a lane mask) run them too.
template <typename T>
GSR_HOST_DEVICE T gsr_select(bool m, T a, T b) {
  return m ? a : b;
}

}  // namespace gsrender
