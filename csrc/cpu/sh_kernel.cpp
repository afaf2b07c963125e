// CPU kernels of sh_fwd / sh_bwd and of sh_channels_fwd / _bwd (the raster's colour, depth and
// feature channels written in one pass): the per-(camera, Gaussian) math lives in gsrender/sh.h.
// Torch-free: sh.cpp, the ops, checks the arguments and allocates what these write.
#include "sh_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "gsrender/sh.h"
#include "isa.h"
#include "lane_float.h"
#include "stream_store.h"

namespace gsrender {
namespace cpu {
namespace {

// The 3DGS colour before its clamp, SH(mean − campos) + 0.5, in the float operations the tensor
// ops (view direction, sh_fwd, + 0.5) ran, so the channels hold the values they gave.
template <typename T>
Vec3<T> view_dir(const T* mean, const T* campos) {
  return {mean[0] - campos[0], mean[1] - campos[1], mean[2] - campos[2]};
}
template <typename T>
void shifted_sh(int deg, const Vec3<T>& dir, const T* coeffs, T* rgb) {
  sh_eval(deg, dir, coeffs, rgb);
  for (int ch = 0; ch < 3; ++ch) rgb[ch] += T(0.5);
}

// 8 rows of 8 floats transposed in place (r[i][j] -> r[j][i]): unpacks, then pairs of floats and
// 128-bit halves exchanged, as __builtin_shuffle patterns every ISA copy lowers.
inline void transpose8(cpu::LaneF* r) {
  using cpu::i8;
  const auto lo = [](cpu::f8 a, cpu::f8 b) { return __builtin_shuffle(a, b, i8{0, 8, 1, 9, 4, 12, 5, 13}); };
  const auto hi = [](cpu::f8 a, cpu::f8 b) { return __builtin_shuffle(a, b, i8{2, 10, 3, 11, 6, 14, 7, 15}); };
  const auto lo2 = [](cpu::f8 a, cpu::f8 b) { return __builtin_shuffle(a, b, i8{0, 1, 8, 9, 4, 5, 12, 13}); };
  const auto hi2 = [](cpu::f8 a, cpu::f8 b) { return __builtin_shuffle(a, b, i8{2, 3, 10, 11, 6, 7, 14, 15}); };
  const cpu::f8 t0 = lo(r[0].v, r[1].v), t1 = hi(r[0].v, r[1].v), t2 = lo(r[2].v, r[3].v),
                t3 = hi(r[2].v, r[3].v), t4 = lo(r[4].v, r[5].v), t5 = hi(r[4].v, r[5].v),
                t6 = lo(r[6].v, r[7].v), t7 = hi(r[6].v, r[7].v);
  const cpu::f8 u[8] = {lo2(t0, t2), hi2(t0, t2), lo2(t1, t3), hi2(t1, t3),
                        lo2(t4, t6), hi2(t4, t6), lo2(t5, t7), hi2(t5, t7)};
  for (int j = 0; j < 4; ++j) {
    r[j].v = __builtin_shuffle(u[j], u[j + 4], i8{0, 1, 2, 3, 8, 9, 10, 11});
    r[j + 4].v = __builtin_shuffle(u[j], u[j + 4], i8{4, 5, 6, 7, 12, 13, 14, 15});
  }
}

constexpr int kSh3Floats = 3 * 16;  // a degree-3 coefficient row

// The view directions of 8 Gaussians (means 3 floats apart) from campos, one vector per
// coordinate: view_dir per lane.
Vec3<cpu::LaneF> view_dir_lanes(const float* mean, const float* campos) {
  using cpu::LaneF;
  LaneF m[3];
  cpu::load_lanes<3>(mean, 3, m);
  return {m[0] - LaneF(campos[0]), m[1] - LaneF(campos[1]), m[2] - LaneF(campos[2])};
}

// sh_normalize_dir's operations, lane-wise: 1 / max-floored length (floored: the lanes whose
// length is not above 1e-12).
cpu::LaneF inverse_norm_lanes(const Vec3<cpu::LaneF>& d, cpu::LaneM& floored) {
  using cpu::LaneF;
  const LaneF len = gsr_sqrt(dot(d, d));
  floored = !(len > LaneF(1e-12));
  return LaneF(1.0f) / select(floored, LaneF(1e-12), len);  // the floor
}

// 8 Gaussians' degree-3 coefficient rows (row floats apart) as 48 vectors, one per coefficient.
// The next 8 rows' lines are prefetched first: the transposes read the rows in 32-byte pieces,
// 8 rows apart, an order the hardware prefetchers do not run ahead of (1M Gaussians,
// sh_channels_fwd alone, AMD EPYC: 12.3 -> 9.5-9.9 ms at two threads, 23.6 -> 19.3 at one; two
// or four groups ahead no better; sh_channels_bwd, which shares this, 19-22 ms either way). A
// prefetch never faults, past the last row either.
void load_sh3_lanes(const float* coeffs, int64_t row, cpu::LaneF* cf) {
  const uintptr_t next = reinterpret_cast<uintptr_t>(coeffs) + cpu::kLanes * row * sizeof(float);
  for (uintptr_t o = 0; o < cpu::kLanes * row * sizeof(float); o += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(next + o));
  for (int b = 0; b < kSh3Floats; b += cpu::kLanes) {
    for (int l = 0; l < cpu::kLanes; ++l)
      std::memcpy(&cf[b + l].v, coeffs + l * row + b, sizeof(cpu::f8));
    transpose8(cf + b);
  }
}

// shifted_sh at degree 3 in float for 8 Gaussians of one camera, one per lane (cpu::LaneF),
// whose means and [K, 3] coefficient rows (row floats apart) start at mean and coeffs: view_dir,
// sh_normalize_dir's operations (its lane-wise twin here), the shared sh_eval_unit on the 48
// coefficients transposed to one vector each (6 blocks of 8 × 8 floats), + 0.5 — the scalar's
// bits in every lane (tests/test_sh_channels.py checks them under every ISA copy).
void shifted_sh3_lanes(const float* mean, const float* campos, const float* coeffs, int64_t row,
                       cpu::LaneF* rgb) {
  using cpu::LaneF;
  const Vec3<LaneF> d = view_dir_lanes(mean, campos);
  cpu::LaneM floored;
  const LaneF inv_norm = inverse_norm_lanes(d, floored);
  LaneF cf[kSh3Floats];
  load_sh3_lanes(coeffs, row, cf);
  sh_eval_unit(3, inv_norm * d, cf, rgb);
  for (int ch = 0; ch < 3; ++ch) rgb[ch] += LaneF(0.5f);
}

// One camera's share of sh_channels_bwd for 8 Gaussians in float at degree 3, one per lane:
// shifted_sh3_lanes for the clamp's mask, then sh_eval_bwd's operations in its order (the shared
// sh_basis / sh_basis_vjp on the lanes, the coefficient gradients added to v_cf, 48 vectors as
// load_sh3_lanes lays them out, the floor a lane select) — the scalar's bits in every lane
// (tests/test_sh_channels.py). v_rgb: the upstream colour gradient of each lane. Returns v_dir.
Vec3<cpu::LaneF> shifted_sh3_bwd_lanes(const float* mean, const float* campos,
                                       const cpu::LaneF* cf, const cpu::LaneF* v_color,
                                       cpu::LaneF* v_cf) {
  using cpu::LaneF;
  const Vec3<LaneF> d = view_dir_lanes(mean, campos);
  cpu::LaneM floored;
  const LaneF inv_norm = inverse_norm_lanes(d, floored);
  const Vec3<LaneF> n = inv_norm * d;
  LaneF rgb[3], v_rgb[3];
  sh_eval_unit(3, n, cf, rgb);
  // the clamp's gradient passes where rgb + 0.5 >= 0 (torch's clamp_min: NaN passes none)
  for (int ch = 0; ch < 3; ++ch) v_rgb[ch] = select(rgb[ch] + LaneF(0.5f) >= LaneF(0.0f), v_color[ch], LaneF(0.0f));
  LaneF basis[kMaxShBases], v_basis[kMaxShBases];
  sh_basis(3, n, basis);
  for (int k = 0; k < kMaxShBases; ++k) {
    v_basis[k] = cf[3 * k + 0] * v_rgb[0] + cf[3 * k + 1] * v_rgb[1] + cf[3 * k + 2] * v_rgb[2];
    for (int ch = 0; ch < 3; ++ch) v_cf[3 * k + ch] += basis[k] * v_rgb[ch];
  }
  const Vec3<LaneF> v_n = sh_basis_vjp(3, n, v_basis);
  const Vec3<LaneF> tangent = inv_norm * (v_n - dot(n, v_n) * n), radial = inv_norm * v_n;
  return {select(floored, radial.x, tangent.x), select(floored, radial.y, tangent.y),
          select(floored, radial.z, tangent.z)};
}

// shifted_sh of the next 8 Gaussians of one camera (left of them in the chunk and the camera)
// with shifted_sh3_lanes where it applies — float, degree 3, left ≥ 8 — each lane's rgb to
// out(lane, rgb); returns how many it did: 8, or 0 (the caller runs them one by one).
template <typename T, class Out>
int shifted_sh_lanes(int deg, const T* mean, const T* campos, const T* coeffs, int64_t row,
                     int64_t left, const Out& out) {
  if constexpr (std::is_same_v<T, float>) {
    constexpr int L = cpu::kLanes;
    if (deg != 3 || left < L) return 0;
    cpu::LaneF rgb[3];
    shifted_sh3_lanes(mean, campos, coeffs, row, rgb);
    for (int l = 0; l < L; ++l) {
      const float lane[3] = {rgb[0][l], rgb[1][l], rgb[2][l]};
      out(l, lane);
    }
    return L;
  }
  return 0;
}


// sh_channels_bwd's work for the next 8 Gaussians (left of them in the block) with
// shifted_sh3_bwd_lanes where it applies — float, degree 3, left ≥ 8 — over every camera in camera
// order: their v_means and v_coeffs rows (row floats apart) written whole, −v_dir added to part
// ([C, 3], Gaussian by Gaussian as the scalar loop does). v_channels: the first Gaussian's
// upstream row of camera 0 (rows CH floats apart, cameras cam_stride apart). Returns 8, or 0
// (the caller runs them one by one).
template <typename T>
int sh_channels_bwd_lanes(int deg, const T* mean, const T* campos, const T* coeffs, int64_t row,
                          const T* v_channels, int64_t cam_stride, int64_t CH, int64_t C,
                          int64_t left, T* v_means, T* v_coeffs, double* part) {
  if constexpr (std::is_same_v<T, float>) {
    using cpu::LaneF;
    constexpr int L = cpu::kLanes;
    if (deg != 3 || left < L) return 0;
    LaneF cf[kSh3Floats], v_cf[kSh3Floats];
    load_sh3_lanes(coeffs, row, cf);
    for (LaneF& v : v_cf) v = LaneF(0.0f);
    Vec3<LaneF> vm{LaneF(0.0f), LaneF(0.0f), LaneF(0.0f)};
    for (int64_t c = 0; c < C; ++c) {
      LaneF v_color[3];  // each lane's upstream colour gradient
      cpu::load_lanes<3>(v_channels + c * cam_stride, CH, v_color);
      const Vec3<LaneF> v_dir = shifted_sh3_bwd_lanes(mean, campos + 3 * c, cf, v_color, v_cf);
      vm.x += v_dir.x, vm.y += v_dir.y, vm.z += v_dir.z;
      for (int l = 0; l < L; ++l)
        part[3 * c] -= v_dir.x[l], part[3 * c + 1] -= v_dir.y[l], part[3 * c + 2] -= v_dir.z[l];
    }
    for (int b = 0; b < kSh3Floats; b += L) {
      transpose8(v_cf + b);  // back to one Gaussian's 8 coefficients per vector
      for (int l = 0; l < L; ++l)
        std::memcpy(v_coeffs + l * row + b, &v_cf[b + l].v, sizeof(cpu::f8));
    }
    for (int l = 0; l < L; ++l) {
      std::fill(v_coeffs + l * row + kSh3Floats, v_coeffs + (l + 1) * row, 0.0f);  // K > 16
      v_means[3 * l] = vm.x[l], v_means[3 * l + 1] = vm.y[l], v_means[3 * l + 2] = vm.z[l];
    }
    return L;
  }
  return 0;
}

// Gaussians per backward work item: fixed (not per thread) so v_campos's reduction order, and
// hence the result, does not depend on the number of threads.
constexpr int64_t kChannelsBwdBlock = 256;

}  // namespace

template <typename T>
void sh_fwd_gaussians(int64_t degree, const T* dp, const T* cp, int64_t C, int64_t N, int64_t K,
                      T* out) {
  const int deg = static_cast<int>(degree);
  cpu::parallel_for(0, C * N, 2048, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t n = idx % N;
      sh_eval(deg, load_vec3(dp + 3 * idx), cp + n * K * 3, out + 3 * idx);
    }
  });
}

template <typename T>
void sh_bwd_gaussians(int64_t degree, const T* dp, const T* cp, const T* gp, int64_t C, int64_t N,
                      int64_t K, T* vd, T* vc) {
  const int deg = static_cast<int>(degree);
  // Parallel over Gaussians so each v_coeffs row is owned by one thread (summed over cameras
  // in camera order: deterministic).
  cpu::parallel_for(0, N, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t c = 0; c < C; ++c) {
        const int64_t idx = c * N + n;
        store_vec3(vd + 3 * idx, sh_eval_bwd(deg, load_vec3(dp + 3 * idx), cp + n * K * 3,
                                             gp + 3 * idx, vc + n * K * 3));
      }
    }
  });
}

template <typename T>
ShChannelsFinite sh_channels_fwd_gaussians(int64_t degree, const T* mp, const T* pp, const T* cp,
                                           const T* dp, const T* fp, bool per_camera, int64_t C,
                                           int64_t N, int64_t K, int64_t D, T* op) {
  const int64_t CH = 4 + D;
  const size_t out_bytes = size_t(C * N * CH) * sizeof(T);
  std::atomic<bool> bad_coeffs{false}, bad_features{false};
  const int deg = static_cast<int>(degree);
  // Wide outputs (D = 256: 104 MB at 100k Gaussians) streamed (stream_store.h), a row as its
  // four leading values and then its features, 16 bytes at a time: rows of 16-byte multiples.
  const bool stream = out_bytes >= size_t(cpu::kStreamMin) && (CH * sizeof(T)) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(op) % 16 == 0;
  // one Gaussian's channels from its rgb (before the clamp)
  const auto write = [&](int64_t idx, int64_t n, const T* rgb) {
    alignas(16) T head[4];
    T* o = op + idx * CH;
    T* h = stream ? head : o;
    for (int ch = 0; ch < 3; ++ch) h[ch] = rgb[ch] < T(0) ? T(0) : rgb[ch];  // NaN stays
    h[3] = dp[idx];
    const T* f = fp + (per_camera ? idx : n) * D;
    if (stream)
      cpu::stream_copy(o, head, 4), cpu::stream_copy(o + 4, f, D);
    else if (D > 0)
      std::memcpy(o + 4, f, sizeof(T) * D);
  };
  // The SH coefficients and features must be finite: checked here, where the pass reads them
  // anyway, rather than by render.py's separate reduction over them (192 MB of coefficients at
  // 1M Gaussians). A worker's range in blocks of kCheckBlock Gaussians, each block's rows
  // checked from L1 / L2 right after its pass (the coefficients in camera 0's blocks only).
  constexpr int64_t kCheckBlock = 256;  // 48 KB of degree-3 float coefficients
  cpu::parallel_for(0, C * N, 2048, [&](int64_t begin, int64_t end) {
    for (int64_t b0 = begin; b0 < end; b0 += kCheckBlock) {
      const int64_t b1 = std::min(end, b0 + kCheckBlock);
      const int64_t c0 = b0 / N, n0 = b0 - c0 * N;
      int64_t c = c0, n = n0;  // (no division per Gaussian)
      for (int64_t idx = b0; idx < b1;) {
        if (n == N) n = 0, ++c;
        const auto lane = [&](int l, const T* rgb) { write(idx + l, n + l, rgb); };
        if (const int done = shifted_sh_lanes(deg, mp + 3 * n, pp + 3 * c, cp + n * K * 3,
                                              K * 3, std::min(b1 - idx, N - n), lane)) {
          idx += done, n += done;
          continue;
        }
        T rgb[3];
        shifted_sh(deg, view_dir(mp + 3 * n, pp + 3 * c), cp + n * K * 3, rgb);
        write(idx, n, rgb);
        ++idx, ++n;
      }
      if (c0 == 0 && cpu::any_nonfinite(cp + n0 * K * 3, (std::min(b1, N) - n0) * K * 3))
        bad_coeffs.store(true, std::memory_order_relaxed);
      const bool feat_rows = D > 0 && (per_camera || c0 == 0);  // shared [N, D]: camera 0's
      const int64_t f0 = per_camera ? b0 : n0, f1 = per_camera ? b1 : std::min(b1, N);
      if (feat_rows && cpu::any_nonfinite(fp + f0 * D, (f1 - f0) * D))
        bad_features.store(true, std::memory_order_relaxed);
    }
    if (stream) _mm_sfence();
  });
  return {!bad_coeffs.load(), !bad_features.load()};
}

template <typename T>
void sh_channels_bwd_gaussians(int64_t degree, const T* mp, const T* pp, const T* cp,
                               const T* gp, int64_t C, int64_t N, int64_t K, int64_t CH, T* vm,
                               T* vc, T* vp) {
  const int deg = static_cast<int>(degree);
  // Per block of Gaussians its [C, 3] share of v_campos = −Σ_n v_dir, in double, summed over
  // the blocks in order afterwards; v_means and v_coeffs rows are owned by one block each
  // (summed over cameras in camera order).
  const int64_t num_blocks = (N + kChannelsBwdBlock - 1) / kChannelsBwdBlock;
  std::vector<double> partial(static_cast<size_t>(num_blocks * C * 3), 0.0);
  cpu::parallel_for(0, num_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      double* part = partial.data() + blk * C * 3;
      for (int64_t n = blk * kChannelsBwdBlock, n_end = std::min(N, n + kChannelsBwdBlock);
           n < n_end; ++n) {
        if (const int done = sh_channels_bwd_lanes(deg, mp + 3 * n, pp, cp + n * K * 3, K * 3,
                                                   gp + n * CH, N * CH, CH, C, n_end - n,
                                                   vm + 3 * n, vc + n * K * 3, part)) {
          n += done - 1;
          continue;
        }
        std::fill(vm + 3 * n, vm + 3 * n + 3, T(0));
        std::fill(vc + n * K * 3, vc + (n + 1) * K * 3, T(0));
        for (int64_t c = 0; c < C; ++c) {
          const int64_t idx = c * N + n;
          const Vec3<T> dir = view_dir(mp + 3 * n, pp + 3 * c);
          T rgb[3], v_rgb[3];
          shifted_sh(deg, dir, cp + n * K * 3, rgb);
          // the clamp's gradient passes where rgb >= 0 (torch's clamp_min: NaN passes none)
          for (int ch = 0; ch < 3; ++ch) v_rgb[ch] = rgb[ch] >= T(0) ? gp[idx * CH + ch] : T(0);
          const Vec3<T> v_dir = sh_eval_bwd(deg, dir, cp + n * K * 3, v_rgb, vc + n * K * 3);
          vm[3 * n] += v_dir.x, vm[3 * n + 1] += v_dir.y, vm[3 * n + 2] += v_dir.z;
          part[3 * c] -= v_dir.x, part[3 * c + 1] -= v_dir.y, part[3 * c + 2] -= v_dir.z;
        }
      }
    }
  });
  for (int64_t c = 0; c < C; ++c)
    for (int e = 0; e < 3; ++e) {
      double acc = 0.0;
      for (int64_t blk = 0; blk < num_blocks; ++blk) acc += partial[(blk * C + c) * 3 + e];
      vp[3 * c + e] = static_cast<T>(acc);
    }
}

#define GSR_SH_KERNELS(T)                                                                         \
  template void sh_fwd_gaussians<T>(int64_t, const T*, const T*, int64_t, int64_t, int64_t, T*);  \
  template void sh_bwd_gaussians<T>(int64_t, const T*, const T*, const T*, int64_t, int64_t,      \
                                    int64_t, T*, T*);                                             \
  template ShChannelsFinite sh_channels_fwd_gaussians<T>(int64_t, const T*, const T*, const T*,   \
                                                         const T*, const T*, bool, int64_t,       \
                                                         int64_t, int64_t, int64_t, T*);          \
  template void sh_channels_bwd_gaussians<T>(int64_t, const T*, const T*, const T*, const T*,     \
                                             int64_t, int64_t, int64_t, int64_t, T*, T*, T*);
GSR_SH_KERNELS(float)
GSR_SH_KERNELS(double)
#undef GSR_SH_KERNELS

}  // namespace cpu
}  // namespace gsrender
