// Self-test of the SIMT runtime (tools/simt), run by tests/test_simt_runtime.py:
//   simt_selftest semantics   the collectives against CUDA's documented semantics (shuffle modes
//                             and widths, out-of-range source lanes, votes with partial masks,
//                             block barriers with counts) and the emulated PTX instructions
//                             (mma f16 / bf16 / tf32, ldmatrix x2 / x4 / .trans, cp.async, tf32
//                             rounding) against plain host arithmetic on the PTX ISA layouts;
//                             prints one line per check, exit 1 on any failure.
//   simt_selftest round       reads float32 values (raw, stdin) and writes their f16 and bf16
//                             bits as the stand-ins round them (uint16 f16[n], then bf16[n]),
//                             for the comparison with torch's rounding in the tests.
//   simt_selftest fault NAME  launches a deliberately broken kernel (lane_exit, divergent_barrier,
//                             deadlock, trap); prints the launch error, exit 3 when the launch
//                             failed as it must, 0 if it (wrongly) succeeded.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../csrc/cuda/ptx.cuh"
#include "gsrender/launch/common.h"

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

// ---- shuffles, votes, barriers -------------------------------------------------------------

// Reference of CUDA's __shfl_*_sync(0xffffffff, v, arg, width) for lane l (CUDA C++ Programming
// Guide, warp shuffle functions): the source lane, or l itself when the source is out of range.
int ref_src(int mode, int l, int arg, int width) {
  const int base = l / width * width;
  switch (mode) {
    case 0: return base + arg % width;                                // idx
    case 1: return l - arg >= base ? l - arg : l;                     // up
    case 2: return l + arg < base + width ? l + arg : l;              // down
    default: return (l ^ arg) < base + width ? l ^ arg : l;           // xor: later groups → own
  }
}

__global__ void shfl_kernel(int mode, int arg, int width, int* out) {
  const int l = threadIdx.x;
  const int v = 100 + l;
  int r = 0;
  switch (mode) {
    case 0: r = __shfl_sync(0xffffffffu, v, arg, width); break;
    case 1: r = __shfl_up_sync(0xffffffffu, v, arg, width); break;
    case 2: r = __shfl_down_sync(0xffffffffu, v, arg, width); break;
    default: r = __shfl_xor_sync(0xffffffffu, v, arg, width); break;
  }
  out[l] = r;
}

__global__ void vote_kernel(unsigned* out) {
  const int l = threadIdx.x & 31, w = threadIdx.x >> 5;
  // lanes 0–15 vote among themselves while lanes 16–31 take the other branch
  if (l < 16) {
    out[4 * (2 * w)] = __ballot_sync(0x0000ffffu, l % 3 == 0);
    out[4 * (2 * w) + 1] = __all_sync(0x0000ffffu, l < 16);
    out[4 * (2 * w) + 2] = __any_sync(0x0000ffffu, l == 7 && w == 1);
  } else {
    out[4 * (2 * w + 1)] = __ballot_sync(0xffff0000u, l % 2 == 0);
  }
  __syncwarp();
}

__global__ void barrier_kernel(int* out) {
  const int t = threadIdx.x;
  __shared__ int s[96];
  s[t] = t * t;
  const int c = __syncthreads_count(t % 5 == 0);
  const int o = __syncthreads_or(t == 77);
  const int a = __syncthreads_and(t < 96);
  out[t] = s[(t + 1) % 96] + (t == 0 ? 1000 * c + 100 * o + 10 * a : 0);
}

void check_collectives() {
  int* out;
  cudaMalloc(&out, 128 * sizeof(int));
  const char* names[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"};
  for (int mode = 0; mode < 4; ++mode)
    for (int width : {32, 16, 8, 4, 2, 1})
      for (int arg : {0, 1, 2, 3, 5, 17, 31}) {
        GSR_LAUNCH(1, 32, 0, nullptr, shfl_kernel)(mode, arg, width, out);
        bool ok = cudaGetLastError() == cudaSuccess;
        for (int l = 0; l < 32 && ok; ++l) ok = out[l] == 100 + ref_src(mode, l, arg, width);
        if (!ok || (width == 4 && arg <= 3))
          expect(ok, std::string(names[mode]) + " width " + std::to_string(width) + " arg " +
                         std::to_string(arg));
        else
          failures += !ok;
      }
  unsigned* v;
  cudaMalloc(&v, 16 * sizeof(unsigned));
  std::memset(v, 0, 16 * sizeof(unsigned));
  GSR_LAUNCH(1, 64, 0, nullptr, vote_kernel)(v);
  unsigned b0 = 0, b1 = 0;
  for (int l = 0; l < 16; ++l) b0 |= (l % 3 == 0) << l;
  for (int l = 16; l < 32; ++l) b1 |= unsigned(l % 2 == 0) << l;
  expect(cudaGetLastError() == cudaSuccess && v[0] == b0 && v[4] == b1 && v[8] == b0 &&
             v[12] == b1,
         "__ballot_sync with a half-warp mask counts only its lanes");
  expect(v[1] == 1 && v[2] == 0 && v[9] == 1 && v[10] == 1, "__all_sync / __any_sync, half mask");
  GSR_LAUNCH(1, 96, 0, nullptr, barrier_kernel)(out);
  bool ok = cudaGetLastError() == cudaSuccess;
  for (int t = 0; t < 96 && ok; ++t)
    ok = out[t] == ((t + 1) % 96) * ((t + 1) % 96) + (t == 0 ? 1000 * 20 + 100 + 10 : 0);
  expect(ok, "__syncthreads_count / _or / _and over 3 warps; shared memory published");
  cudaFree(out);
  cudaFree(v);
}

// ---- the emulated PTX ---------------------------------------------------------------------

// The PTX ISA's fragment tables ("Matrix Fragments for mma.m16n8k16 / mma.m16n8k8"), element by
// element in the ISA's own terms: groupID g = lane >> 2, threadID_in_group t = lane % 4, and a
// thread's elements a0, a1, … held two per .f16x2 / .bf16x2 register (one per .tf32 register).
// A second transcription, written apart from simt_ptx.h's per-register formulas; the expected
// D is the plain product of the whole matrices, so a misreading shared by the emulation and one
// table cannot cancel.
struct Pos {
  int row, col;
};
Pos isa_a(int ty, int lane, int e) {  // A: 16 × K
  const int g = lane >> 2, t = lane % 4;
  if (ty == 2)  // tf32 a0..a3: row g for a0, a2, g + 8 for a1, a3; col t for a0, a1, t + 4 for a2, a3
    return {(e == 1 || e == 3) ? g + 8 : g, (e == 2 || e == 3) ? t + 4 : t};
  // f16 / bf16 a0..a7: row g for a0, a1, a4, a5, else g + 8; col t·2 + (i & 1), + 8 for i ≥ 4
  const bool low_rows = e == 0 || e == 1 || e == 4 || e == 5;
  return {low_rows ? g : g + 8, t * 2 + (e & 1) + (e >= 4 ? 8 : 0)};
}
Pos isa_b(int ty, int lane, int e) {  // B: K × 8
  const int g = lane >> 2, t = lane % 4;
  if (ty == 2) return {e == 0 ? t : t + 4, g};  // tf32 b0, b1: row t, t + 4; col g
  return {t * 2 + (e & 1) + (e >= 2 ? 8 : 0), g};  // b0..b3: row t·2 + (i & 1) (+ 8 for i ≥ 2)
}
Pos isa_c(int lane, int e) {  // C / D: 16 × 8, c0..c3 (f32)
  const int g = lane >> 2, t = lane % 4;
  return {e < 2 ? g : g + 8, t * 2 + (e & 1)};
}

template <int kTy>  // 0 f16, 1 bf16, 2 tf32
uint32_t operand_bits(float x) {
  if (kTy == 0) return __half_as_ushort(__float2half_rn(x));
  if (kTy == 1) return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  return gsrender::ptx::to_tf32(x);
}

template <int kTy>
__device__ void run_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                        const float (&c)[4]) {
  if (kTy == 0) gsrender::ptx::mma_m16n8k16_f16(d, a, b, c);
  if (kTy == 1) gsrender::ptx::mma_m16n8k16_bf16(d, a, b, c);
  if (kTy == 2) gsrender::ptx::mma_m16n8k8_tf32(d, a, b, c);
}

// A[16][K] (row-major), B[K][8], C[16][8] placed in the lanes' registers by the ISA tables
// above, D gathered back by them.
template <int kTy>
__global__ void mma_kernel(const float* A, const float* B, const float* C, float* D) {
  constexpr int K = kTy == 2 ? 8 : 16, per_reg = kTy == 2 ? 1 : 2;
  const int lane = threadIdx.x;
  uint32_t a[4] = {}, b[2] = {};
  float c[4], d[4];
  for (int e = 0; e < 4 * per_reg; ++e) {
    const Pos p = isa_a(kTy, lane, e);
    a[e / per_reg] |= operand_bits<kTy>(A[p.row * K + p.col]) << (16 * (e % per_reg));
  }
  for (int e = 0; e < 2 * per_reg; ++e) {
    const Pos p = isa_b(kTy, lane, e);
    b[e / per_reg] |= operand_bits<kTy>(B[p.row * 8 + p.col]) << (16 * (e % per_reg));
  }
  for (int e = 0; e < 4; ++e) c[e] = C[isa_c(lane, e).row * 8 + isa_c(lane, e).col];
  run_mma<kTy>(d, a, b, c);
  for (int e = 0; e < 4; ++e) D[isa_c(lane, e).row * 8 + isa_c(lane, e).col] = d[e];
}

// The kernels' own route for f16 / bf16 operands, with no A or B table at all: A from a
// row-major 16 × 16 shared tile by ldmatrix.x4 (lane l: row l % 16, columns 8·(l / 16)..), B
// from a row-major [k][n] 16 × 8 tile by ldmatrix.x2.trans (lane l: row l % 16); D by the C table.
template <int kTy>
__global__ void mma_ldmatrix_kernel(const float* A, const float* B, const float* C, float* D) {
  struct alignas(16) Tiles {
    uint16_t a[16][16], b[16][8];
  };
  __shared__ Tiles sh;
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) sh.a[i / 16][i % 16] = operand_bits<kTy>(A[i]);
  for (int i = lane; i < 128; i += 32) sh.b[i / 8][i % 8] = operand_bits<kTy>(B[i]);
  __syncwarp();
  uint32_t a[4], b[2];
  float c[4], d[4];
  gsrender::ptx::ldmatrix_x4(a, &sh.a[lane % 16][8 * (lane / 16)]);
  gsrender::ptx::ldmatrix_x2_trans(b, &sh.b[lane % 16][0]);
  for (int e = 0; e < 4; ++e) c[e] = C[isa_c(lane, e).row * 8 + isa_c(lane, e).col];
  run_mma<kTy>(d, a, b, c);
  for (int e = 0; e < 4; ++e) D[isa_c(lane, e).row * 8 + isa_c(lane, e).col] = d[e];
}

float round_to(int ty, float x) {
  if (ty == 0) return __half2float(__float2half_rn(x));
  if (ty == 1) return __bfloat162float(__float2bfloat16_rn(x));
  const uint32_t u = gsrender::ptx::to_tf32(x);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// max |D − (A·B + C)| over the whole 16 × 8 result, the product of the rounded operands in
// double (exact products; f32 accumulation of K terms stays well inside 1e-5 for |x| ≤ 1).
template <int kTy>
double product_error(const std::vector<float>& A, const std::vector<float>& B,
                     const std::vector<float>& C, const std::vector<float>& D) {
  constexpr int K = kTy == 2 ? 8 : 16;
  double err = 0;
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 8; ++n) {
      double e = C[i * 8 + n];
      for (int k = 0; k < K; ++k) e += double(round_to(kTy, A[i * K + k])) * round_to(kTy, B[k * 8 + n]);
      err = std::fmax(err, std::fabs(e - D[i * 8 + n]));
    }
  return err;
}

template <int kTy>
void check_mma(const char* name) {
  constexpr int K = kTy == 2 ? 8 : 16;
  std::vector<float> A(16 * K), B(K * 8), C(16 * 8), D(16 * 8);
  unsigned s = 12345;
  auto rnd = [&] { return (s = s * 1103515245u + 12345u, float((s >> 8) % 2001) / 1000.0f - 1.0f); };
  for (float& x : A) x = rnd();
  for (float& x : B) x = rnd();
  for (float& x : C) x = rnd();
  GSR_LAUNCH(1, 32, 0, nullptr, mma_kernel<kTy>)(A.data(), B.data(), C.data(), D.data());
  double err = product_error<kTy>(A, B, C, D);
  expect(cudaGetLastError() == cudaSuccess && err < 1e-5,
         std::string(name) + " D = A·B + C, operands by the ISA tables (max err " +
             std::to_string(err) + ")");
  if (kTy != 2) {
    std::fill(D.begin(), D.end(), NAN);
    GSR_LAUNCH(1, 32, 0, nullptr, mma_ldmatrix_kernel<kTy>)(A.data(), B.data(), C.data(), D.data());
    err = product_error<kTy>(A, B, C, D);
    expect(cudaGetLastError() == cudaSuccess && err < 1e-5,
           std::string(name) + " D = A·B + C, operands by ldmatrix (max err " +
               std::to_string(err) + ")");
  }
  // a single 1 in A at (5, 11 % K) moves row 11 % K of B into row 5 of D
  std::fill(A.begin(), A.end(), 0.0f), std::fill(C.begin(), C.end(), 0.0f);
  A[5 * K + 11 % K] = 1.0f;
  for (int i = 0; i < K * 8; ++i) B[i] = float(i);
  GSR_LAUNCH(1, 32, 0, nullptr, mma_kernel<kTy>)(A.data(), B.data(), C.data(), D.data());
  bool ok = true;
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 8; ++n) ok = ok && D[i * 8 + n] == (i == 5 ? B[(11 % K) * 8 + n] : 0.0f);
  expect(ok, std::string(name) + " places a single element where A·B says");
}

// ldmatrix over a [32][16] b16 shared block: lane l points at row l (matrix l >> 3, row l & 7).
template <int kN, bool kTrans>
__global__ void ldmatrix_kernel(uint32_t* out) {
  struct alignas(16) Rows {
    uint16_t v[32][8];
  };
  __shared__ Rows rows;
  auto& m = rows.v;
  const int l = threadIdx.x;
  for (int c = 0; c < 8; ++c) m[l][c] = static_cast<uint16_t>(256 * l + c);
  __syncwarp();
  uint32_t r[4] = {};
  if (kN == 2) {
    uint32_t r2[2];
    gsrender::ptx::ldmatrix_x2_trans(r2, &m[l & 15][0]);
    r[0] = r2[0], r[1] = r2[1];
  } else if (kTrans) {
    gsrender::ptx::ldmatrix_x4_trans(r, &m[l][0]);
  } else {
    gsrender::ptx::ldmatrix_x4(r, &m[l][0]);
  }
  for (int i = 0; i < 4; ++i) out[4 * l + i] = r[i];
}

template <int kN, bool kTrans>
void check_ldmatrix(const char* name) {
  std::vector<uint32_t> out(128);
  GSR_LAUNCH(1, 32, 0, nullptr, ldmatrix_kernel<kN, kTrans>)(out.data());
  bool ok = cudaGetLastError() == cudaSuccess;
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    for (int m = 0; m < kN; ++m) {
      // element (row, col) of matrix m is 256·(8m + row) + col
      auto el = [&](int row, int col) { return uint32_t(256 * (8 * m + row) + col); };
      const uint32_t lo = kTrans ? el(2 * t, g) : el(g, 2 * t);
      const uint32_t hi = kTrans ? el(2 * t + 1, g) : el(g, 2 * t + 1);
      ok = ok && out[4 * l + m] == (lo | (hi << 16));
    }
  }
  expect(ok, name);
}

// cp.async: the data lands at the wait, not before; src-size < 16 zero-fills.
__global__ void cp_async_kernel(const float* src, float* out) {
  struct alignas(16) Buf {
    float v[32][4];
  };
  __shared__ Buf b;
  auto& buf = b.v;
  const int l = threadIdx.x;
  for (int i = 0; i < 4; ++i) buf[l][i] = -1.0f;
  gsrender::ptx::cp_async_cg16(&buf[l][0], src + 4 * l, l == 3 ? 8 : 16);
  gsrender::ptx::cp_async_commit();
  out[l] = buf[l][0];  // before the wait: still the old value in this runtime
  gsrender::ptx::cp_async_wait_group<0>();
  __syncwarp();
  for (int i = 0; i < 4; ++i) out[32 + 4 * l + i] = buf[l][i];
}

void check_cp_async() {
  std::vector<float> src(128), out(160);
  for (int i = 0; i < 128; ++i) src[i] = float(i);
  GSR_LAUNCH(1, 32, 0, nullptr, cp_async_kernel)(src.data(), out.data());
  bool ok = cudaGetLastError() == cudaSuccess;
  for (int l = 0; l < 32; ++l) {
    ok = ok && out[l] == -1.0f;
    for (int i = 0; i < 4; ++i)
      ok = ok && out[32 + 4 * l + i] == (l == 3 && i >= 2 ? 0.0f : src[4 * l + i]);
  }
  expect(ok, "cp.async.cg lands at wait_group, zero-fills past src-size");
}

void check_tf32() {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  const float one = 1.0f, ulp = std::ldexp(1.0f, -10);  // the tf32 grid step at 1
  const bool ok = gsrender::ptx::to_tf32(one + ulp / 2) == bits(one + ulp) &&  // tie: away
                  gsrender::ptx::to_tf32(-(one + ulp / 2)) == bits(-(one + ulp)) &&
                  gsrender::ptx::to_tf32(one + ulp / 2 - std::ldexp(1.0f, -23)) == bits(one) &&
                  gsrender::ptx::to_tf32(INFINITY) == bits(INFINITY);
  expect(ok, "cvt.rna.tf32.f32 rounds to nearest, ties away from zero");
}

// ---- faults: each must fail its launch with a message, never hang ---------------------------

__global__ void lane_exit_kernel(int* out) {
  if (threadIdx.x == 7) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, int(threadIdx.x), 1);
}
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 32)
    __syncthreads();
  else
    __syncthreads();
  out[threadIdx.x] = 1;
}
__global__ void deadlock_kernel(int* out) {
  if (threadIdx.x < 16) __syncthreads();  // the other lanes wait for them in a shuffle
  else out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
}
__global__ void trap_kernel(int*) {
  if (threadIdx.x == 3) __trap();
  __syncthreads();
}

int fault(const std::string& name) {
  int* out;
  cudaMalloc(&out, 64 * sizeof(int));
  if (name == "lane_exit") GSR_LAUNCH(1, 32, 0, nullptr, lane_exit_kernel)(out);
  else if (name == "divergent_barrier") GSR_LAUNCH(1, 64, 0, nullptr, divergent_barrier_kernel)(out);
  else if (name == "deadlock") GSR_LAUNCH(1, 32, 0, nullptr, deadlock_kernel)(out);
  else if (name == "trap") GSR_LAUNCH(1, 32, 0, nullptr, trap_kernel)(out);
  else return 2;
  const cudaError_t e = cudaGetLastError();
  std::printf("%s: %s: %s\n", name.c_str(), cudaGetErrorName(e), cudaGetErrorString(e));
  cudaFree(out);
  return e == cudaErrorLaunchFailure ? 3 : 0;
}

}  // namespace

int round_stdin() {
  std::vector<float> x;
  float v;
  while (std::fread(&v, sizeof v, 1, stdin) == 1) x.push_back(v);
  std::vector<uint16_t> out;
  for (float f : x) out.push_back(__half_as_ushort(__float2half_rn(f)));
  for (float f : x) out.push_back(__bfloat16_as_ushort(__float2bfloat16_rn(f)));
  std::fwrite(out.data(), sizeof(uint16_t), out.size(), stdout);
  return 0;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "fault" && argc == 3) return fault(argv[2]);
  if (mode == "round") return round_stdin();
  if (mode != "semantics") {
    std::fprintf(stderr, "usage: simt_selftest semantics | round | fault NAME\n");
    return 2;
  }
  check_collectives();
  check_mma<0>("mma.m16n8k16.f16");
  check_mma<1>("mma.m16n8k16.bf16");
  check_mma<2>("mma.m16n8k8.tf32");
  check_ldmatrix<2, true>("ldmatrix.x2.trans");
  check_ldmatrix<4, false>("ldmatrix.x4");
  check_ldmatrix<4, true>("ldmatrix.x4.trans");
  check_cp_async();
  check_tf32();
  std::printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
