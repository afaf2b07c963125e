// kernel_driver: runs gsrender's CUDA kernels on case folders through the torch-free launch
// layer (gsrender/launch/*.h) and writes each kernel's outputs as a result case, for
// `python -m gsrender.testing.check OUT_DIR`. No torch: it builds with nvcc alone
// (tools/kernel_driver/build.sh), links the CUDA runtime dynamically and embeds PTX, so it runs
// on any CUDA runtime new enough for the toolkit, a PTX-level simulator included.
//
// Usage: kernel_driver CASES_DIR OUT_DIR [--only SUBSTRING] [--echo]
//   --echo  no CUDA call at all: writes each case's expected arrays back as its outputs (tests
//           this program's case reader / writer on a machine without a GPU; CI runs it).
// Exit code: 0 when every case ran (or was skipped because the device lacks what it needs),
// 1 when a case raised an error, 2 on bad usage.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "case_io.h"
#include "gsrender/launch/binning.h"
#include "gsrender/launch/contributors.h"
#include "gsrender/launch/projection.h"
#include "gsrender/launch/rasterize.h"
#include "gsrender/launch/sh.h"
#include "gsrender/launch/weight_stats.h"

namespace kdriver {
namespace {

namespace L = gsrender::launch;

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Skip : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
}

// A device buffer (freed at scope end).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Buffer() {
    if (ptr_) cudaFree(ptr_);
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  L::Workspace ws() const { return {ptr_, bytes_}; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// The device copies of a case's inputs and the outputs a kernel writes (with their host shape).
struct Device {
  std::map<std::string, Buffer> in;
  std::map<std::string, std::pair<Array, Buffer>> out;

  explicit Device(const Case& c) {
    for (const auto& [name, a] : c.inputs) {
      Buffer b(a.bytes.size());
      if (!a.bytes.empty())
        check(cudaMemcpy(b.get(), a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice),
              "cudaMemcpy H2D");
      in.emplace(name, std::move(b));
    }
  }
  template <typename T>
  const T* input(const std::string& k) const {
    auto it = in.find(k);
    if (it == in.end()) throw std::runtime_error("case has no input '" + k + "'");
    return it->second.as<const T>();
  }
  template <typename T>
  const T* input_opt(const std::string& k) const {
    auto it = in.find(k);
    return it == in.end() ? nullptr : it->second.as<const T>();
  }
  // A new output the kernel must write whole, pre-filled with a value no kernel writes (the
  // quiet NaN's bits: NaN as a float, 2143289344 or 0x7ff8… as an integer), so an element it
  // leaves unwritten fails the checker.
  template <typename T>
  T* output(const std::string& k, const std::string& dtype, std::vector<int64_t> shape) {
    Array a = Array::make(dtype, std::move(shape));
    const size_t width = dtype_size(dtype);
    const uint64_t nan_bits = width == 8 ? 0x7ff8000000000000ull : 0x7fc00000u;
    for (size_t i = 0; i + width <= a.bytes.size(); i += width)
      std::memcpy(a.bytes.data() + i, &nan_bits, width);  // little-endian: the low bytes
    return place<T>(k, std::move(a));
  }
  // A new output the launch layer documents as filled by the caller (an accumulator: 0; the
  // top-K ids: -1), with that byte.
  template <typename T>
  T* output_filled(const std::string& k, const std::string& dtype, std::vector<int64_t> shape,
                   int byte) {
    Array a = Array::make(dtype, std::move(shape));
    std::memset(a.bytes.data(), byte, a.bytes.size());
    return place<T>(k, std::move(a));
  }
  template <typename T>
  T* place(const std::string& k, Array a) {
    Buffer b(a.bytes.size());
    if (b.bytes())
      check(cudaMemcpy(b.get(), a.bytes.data(), b.bytes(), cudaMemcpyHostToDevice),
            "cudaMemcpy fill");
    T* p = b.as<T>();
    out[k] = {std::move(a), std::move(b)};
    return p;
  }
  Arrays fetch() {
    Arrays r;
    for (auto& [k, ab] : out) {
      if (!ab.first.bytes.empty())
        check(cudaMemcpy(ab.first.bytes.data(), ab.second.get(), ab.first.bytes.size(),
                         cudaMemcpyDeviceToHost),
              "cudaMemcpy D2H");
      r[k] = ab.first;
    }
    return r;
  }
};

template <typename T>
const char* dtype_name() {
  return sizeof(T) == 8 ? "float64" : "float32";
}

bool is_double(const Case& c, const char* key) { return c.in(key).dtype == "float64"; }

// ---- kernels --------------------------------------------------------------------------------

template <typename T>
void run_project_fwd(const Case& c, Device& d, cudaStream_t s) {
  const int64_t N = c.in("means").dim(0), C = c.in("viewmats").dim(0);
  const char* dt = dtype_name<T>();
  L::ProjectFwdArgs<T> a{d.input<T>("means"), d.input<T>("quats"), d.input<T>("scales"),
                         d.input<T>("opacities"), d.input<T>("viewmats"), d.input<T>("Ks"), C, N,
                         static_cast<int>(c.num("width")), static_cast<int>(c.num("height")),
                         T(c.num("eps2d")), T(c.num("near_plane")), T(c.num("far_plane")),
                         T(c.num("radius_clip")), c.flag("antialiased")};
  a.radii = d.output<int32_t>("radii", "int32", {C, N, 2});
  a.means2d = d.output<T>("means2d", dt, {C, N, 2});
  a.depths = d.output<T>("depths", dt, {C, N});
  a.conics = d.output<T>("conics", dt, {C, N, 3});
  a.opacities2d = d.output<T>("opacities2d", dt, {C, N});
  check(L::launch_project_fwd(a, s), "launch_project_fwd");
}

template <typename T>
void run_project_bwd(const Case& c, Device& d, cudaStream_t s) {
  const int64_t N = c.in("means").dim(0), C = c.in("viewmats").dim(0);
  const char* dt = dtype_name<T>();
  L::ProjectBwdArgs<T> a{d.input<T>("means"), d.input<T>("quats"), d.input<T>("scales"),
                         d.input<T>("opacities"), d.input<T>("viewmats"), d.input<T>("Ks"), C, N,
                         static_cast<int>(c.num("width")), static_cast<int>(c.num("height")),
                         T(c.num("eps2d")), c.flag("antialiased"), d.input<int32_t>("radii"),
                         d.input<T>("v_means2d"), d.input<T>("v_depths"), d.input<T>("v_conics"),
                         d.input<T>("v_opacities2d")};
  a.v_means = d.output<T>("v_means", dt, {N, 3});
  a.v_quats = d.output<T>("v_quats", dt, {N, 4});
  a.v_scales = d.output<T>("v_scales", dt, {N, 3});
  a.v_opacities = d.output<T>("v_opacities", dt, {N});
  a.v_viewmats = d.output_filled<T>("v_viewmats", dt, {C, 4, 4}, 0);  // row 3 stays 0
  Buffer ws(L::project_bwd_workspace_bytes(a));
  check(L::launch_project_bwd(a, ws.ws(), s), "launch_project_bwd");
}

template <typename T>
void run_sh(const Case& c, Device& d, cudaStream_t s, bool backward) {
  const Array& dirs = c.in("dirs");
  const int64_t C = dirs.dim(0), N = dirs.dim(1), K = c.in("coeffs").dim(1);
  const int deg = static_cast<int>(c.num("degree"));
  const char* dt = dtype_name<T>();
  if (!backward) {
    const L::ShFwdArgs<T> a{deg, C, N, K, d.input<T>("dirs"), d.input<T>("coeffs"),
                            d.output<T>("colors", dt, {C, N, 3})};
    check(L::launch_sh_fwd(a, s), "launch_sh_fwd");
    return;
  }
  const L::ShBwdArgs<T> a{deg, C, N, K, d.input<T>("dirs"), d.input<T>("coeffs"),
                          d.input<T>("v_colors"), d.output<T>("v_dirs", dt, {C, N, 3}),
                          d.output_filled<T>("v_coeffs", dt, {N, K, 3}, 0)};
  check(L::launch_sh_bwd(a, s), "launch_sh_bwd");
}

template <typename T>
void run_bin_tiles(const Case& c, Device& d, cudaStream_t s) {
  const int64_t C = c.in("means2d").dim(0), N = c.in("means2d").dim(1);
  // conics and opacities present: exact binning (the CPU's expected lists were made with them)
  const L::BinArgs<T> a{d.input<T>("means2d"), d.input<int32_t>("radii"), d.input<T>("depths"),
                        C, N, static_cast<int>(c.num("width")), static_cast<int>(c.num("height")),
                        static_cast<int>(c.num("tile_size")), c.flag("sort"),
                        d.input_opt<T>("conics"), d.input_opt<T>("opacities")};
  const gsrender::TileGrid g = gsrender::make_tile_grid(C, a.width, a.height, a.tile_size);
  int32_t* offsets = d.output<int32_t>("tile_offsets", "int32", {C, g.tiles_y, g.tiles_x});
  Buffer ends(sizeof(int64_t) * C * N);
  int64_t M = 0;
  if (C * N > 0) {
    Buffer ws(L::bin_count_workspace_bytes(a));
    check(L::launch_bin_count(a, ends.as<int64_t>(), ws.ws(), s), "launch_bin_count");
    check(cudaMemcpyAsync(&M, ends.as<int64_t>() + C * N - 1, sizeof M, cudaMemcpyDeviceToHost,
                          s),
          "read M");
    check(cudaStreamSynchronize(s), "sync");
  }
  int32_t* ids = d.output<int32_t>("flatten_ids", "int32", {M});
  Buffer ws(L::bin_sort_workspace_bytes(a, M));
  check(L::launch_bin_sort(a, ends.as<int64_t>(), M, offsets, ids, ws.ws(), s), "launch_bin_sort");
}

// RasterArgs over the case's device inputs (colors optional: weight_stats / contributors).
template <typename T>
gsrender::RasterArgs<T> raster_args(const Case& c, const Device& d, int mode) {
  gsrender::RasterArgs<T> p{};
  const Array& m2d = c.in("means2d");
  p.means2d = d.input<T>("means2d"), p.conics = d.input<T>("conics");
  p.opacities = d.input<T>("opacities"), p.colors = d.input_opt<T>("colors");
  p.depths = d.input<T>("depths"), p.backgrounds = d.input_opt<T>("backgrounds");
  p.tile_offsets = d.input<int32_t>("tile_offsets"), p.flatten_ids = d.input<int32_t>("flatten_ids");
  p.C = m2d.dim(0), p.N = m2d.dim(1);
  p.CH = c.in_opt("colors") ? c.in("colors").dim(2) : 1;
  p.M = c.in("flatten_ids").numel();
  p.width = static_cast<int>(c.num("width")), p.height = static_cast<int>(c.num("height"));
  p.tile_size = static_cast<int>(c.num("tile_size"));
  const gsrender::TileGrid g = gsrender::make_tile_grid(p.C, p.width, p.height, p.tile_size);
  p.TW = g.tiles_x, p.TH = g.tiles_y;
  p.sorted = mode == 0;
  const Json& wp = c.params().has("weight_params") ? c.params().at("weight_params") : Json();
  p.sigma_w = T(mode == 1 ? wp.arr.at(0).number() : 0.0);
  p.beta = T(mode == 1 ? wp.arr.at(1).number() : 1.0);
  p.w_bg = T(mode == 1 ? wp.arr.at(2).number() : 0.0);
  if (p.tile_size < 1 || p.tile_size > L::kMaxTileSize) throw Skip("tile_size > 16");
  return p;
}

// The binning arrays pass the device-side validation (as the torch glue runs it).
template <typename T>
void validate(const gsrender::RasterArgs<T>& p, const int32_t* last_ids, cudaStream_t s) {
  const L::ValidateBinningArgs v{p.tile_offsets, p.flatten_ids, last_ids, p.C, p.N, p.M,
                                 p.width, p.height, p.tile_size, p.TW, p.TH};
  Buffer flags(sizeof(int));
  check(L::launch_validate_binning(v, flags.as<int>(), s), "launch_validate_binning");
  int bad = 0;
  check(cudaMemcpyAsync(&bad, flags.get(), sizeof bad, cudaMemcpyDeviceToHost, s), "read flags");
  check(cudaStreamSynchronize(s), "sync");
  if (bad) throw std::runtime_error("binning validation flagged " + std::to_string(bad));
}

// The case's raster_kernel: the kernel the launch plan runs (gsrender/raster_plan.h), by name.
gsrender::RasterKernel kernel_of(const Case& c) {
  const std::string& name = c.params().at("raster_kernel").string();
  for (int k = 0; k < gsrender::kNumRasterKernels; ++k)
    if (name == gsrender::kRasterKernelNames[k]) return static_cast<gsrender::RasterKernel>(k);
  throw std::runtime_error("unknown raster_kernel '" + name + "'");
}

// A Tensor Core case on a device where the plan would not run it is skipped, not failed.
template <typename T>
void require_mma(const gsrender::RasterArgs<T>& p, int cc_major) {
  // (a named target, set member by member: nvcc's host pass rejects a braced argument here)
  gsrender::RasterTarget target;
  target.cuda = true;
  target.float32 = std::is_same_v<T, float>;
  target.tile_size = p.tile_size;
  target.cc_major = cc_major;
  if (!gsrender::mma_runs(target))
    throw Skip("the Tensor Core kernel needs float32, 16x16 tiles and sm_80+ (device: sm_" +
               std::to_string(cc_major) + "x)");
}

template <typename T>
void run_rasterize_fwd(const Case& c, Device& d, cudaStream_t s, int cc_major) {
  const int mode = static_cast<int>(c.num("mode"));
  const gsrender::RasterKernel kernel = kernel_of(c);
  L::RasterFwdArgs<T> a{raster_args<T>(c, d, mode), {}};
  const auto& p = a.in;
  validate(p, nullptr, s);
  const char* dt = dtype_name<T>();
  a.out.render = d.output<T>("render", dt, {p.C, p.height, p.width, p.CH});
  a.out.alphas = d.output<T>("alphas", dt, {p.C, p.height, p.width, 1});
  a.out.last_ids = d.output<int32_t>("last_ids", "int32", {p.C, p.height, p.width});
  a.out.aux = d.output<T>("aux", dt, {p.C, p.height, p.width});
  a.out.stats = d.output_filled<int64_t>("stats", "int64", {p.C, 3}, 0);
  if (kernel == gsrender::RasterKernel::kScalar) {
    check(L::launch_rasterize_fwd(a, s), "launch_rasterize_fwd");
    return;
  }
  require_mma(p, cc_major);
  if constexpr (std::is_same_v<T, float>) {
    Buffer ws(L::rasterize_mma_fwd_workspace_bytes(p, kernel));
    check(L::launch_rasterize_mma_fwd(a, kernel, ws.ws(), s), "launch_rasterize_mma_fwd");
  }
}

template <typename T>
void run_rasterize_bwd(const Case& c, Device& d, cudaStream_t s, int cc_major, Json& checks) {
  const int mode = static_cast<int>(c.num("mode"));
  const gsrender::RasterKernel kernel = kernel_of(c);
  L::RasterBwdArgs<T> a{raster_args<T>(c, d, mode), {}};
  const auto& p = a.in;
  validate(p, d.input<int32_t>("last_ids"), s);
  const char* dt = dtype_name<T>();
  a.io.render = d.input<T>("render"), a.io.alphas = d.input<T>("alphas");
  a.io.last_ids = d.input<int32_t>("last_ids"), a.io.aux = d.input<T>("aux");
  a.io.v_render = d.input<T>("v_render"), a.io.v_alphas = d.input<T>("v_alphas");
  auto alloc = [&] {
    a.io.v_means2d = d.output_filled<T>("v_means2d", dt, {p.C, p.N, 2}, 0);
    a.io.v_conics = d.output_filled<T>("v_conics", dt, {p.C, p.N, 3}, 0);
    a.io.v_opacities = d.output_filled<T>("v_opacities", dt, {p.C, p.N}, 0);
    a.io.v_colors = d.output_filled<T>("v_colors", dt, {p.C, p.N, p.CH}, 0);
    a.io.v_depths = d.output_filled<T>("v_depths", dt, {p.C, p.N}, 0);
    a.io.v_backgrounds = d.output_filled<T>("v_backgrounds", dt, {p.C, p.CH}, 0);
  };
  alloc();
  if (kernel == gsrender::RasterKernel::kScalarDet) {  // run twice: the gradients must agree bit for bit (same device, same code path)
    Buffer ws(L::rasterize_bwd_det_workspace_bytes(a));
    check(L::launch_rasterize_bwd_det(a, ws.ws(), s), "launch_rasterize_bwd_det");
    const Arrays first = d.fetch();
    alloc();
    check(L::launch_rasterize_bwd_det(a, ws.ws(), s), "launch_rasterize_bwd_det");
    const Arrays second = d.fetch();
    bool same = true;
    for (const auto& [k, arr] : first) same = same && arr.bytes == second.at(k).bytes;
    checks.obj["deterministic_repeat_bitwise_equal"] = Json::of(same);
    return;
  }
  if (kernel == gsrender::RasterKernel::kScalar) {
    check(L::launch_rasterize_bwd(a, s), "launch_rasterize_bwd");
    return;
  }
  require_mma(p, cc_major);
  if constexpr (std::is_same_v<T, float>) {
    Buffer ws(L::rasterize_mma_bwd_workspace_bytes(p));
    check(L::launch_rasterize_mma_bwd(a, kernel, ws.ws(), s), "launch_rasterize_mma_bwd");
  }
}

template <typename T>
void run_weight_stats(const Case& c, Device& d, cudaStream_t s) {
  const auto p = raster_args<T>(c, d, 0);
  validate(p, nullptr, s);
  const int64_t K = static_cast<int64_t>(c.num("top_k"));
  const char* dt = dtype_name<T>();
  const L::WeightStatsArgs<T> a{
      p, K, T(c.num("tau_s")), d.output_filled<T>("w_sum", dt, {p.N}, 0),
      d.output_filled<T>("w_max", dt, {p.N}, 0), d.output<int32_t>("n_views", "int32", {p.N}),
      d.output_filled<int32_t>("topk_ids", "int32", {p.C, p.height, p.width, K}, 0xff),
      d.output_filled<T>("topk_weights", dt, {p.C, p.height, p.width, K}, 0)};
  Buffer ws(L::weight_stats_workspace_bytes(a));
  check(L::launch_weight_stats(a, ws.ws(), s), "launch_weight_stats");
}

template <typename T>
void run_contributors(const Case& c, Device& d, cudaStream_t s) {
  const auto p = raster_args<T>(c, d, 0);
  validate(p, nullptr, s);
  const Array* pix = c.in_opt("pixels");
  const int64_t P = pix ? pix->dim(1) : int64_t(p.width) * p.height;
  const int64_t K = static_cast<int64_t>(c.num("K_max"));
  const char* dt = dtype_name<T>();
  L::ContributorsArgs<T> a{p, pix ? d.input<int32_t>("pixels") : nullptr, P, K,
                           T(c.num("tau_rel")), T(c.num("tau_abs")), {}};
  a.out.ids = d.output<int32_t>("ids", "int32", {p.C, P, K});
  a.out.weights = d.output<T>("weights", dt, {p.C, P, K});
  a.out.zs = d.output<T>("zs", dt, {p.C, P, K});
  a.out.clusters = d.output<int32_t>("clusters", "int32", {p.C, P, K});
  a.out.counts = d.output<int32_t>("counts", "int32", {p.C, P});
  a.out.n_render = d.output<int32_t>("n_render", "int32", {p.C, P});
  check(L::launch_contributors(a, s), "launch_contributors");
}

// Runs one case on the device; fills the outputs and the checks (e.g. determinism).
void run_case(const Case& c, Device& d, cudaStream_t s, int cc_major, Json& checks) {
  const std::string& k = c.kernel();
  // every kernel is templated on the float type of its first float input
  const bool f64 = k.rfind("project", 0) == 0 ? is_double(c, "means")
                   : k.rfind("sh_", 0) == 0    ? is_double(c, "dirs")
                                               : is_double(c, "means2d");
  auto dispatch = [&](auto tag) {
    using T = decltype(tag);
    if (k == "project_fwd") return run_project_fwd<T>(c, d, s);
    if (k == "project_bwd") return run_project_bwd<T>(c, d, s);
    if (k == "sh_fwd") return run_sh<T>(c, d, s, false);
    if (k == "sh_bwd") return run_sh<T>(c, d, s, true);
    if (k == "bin_tiles") return run_bin_tiles<T>(c, d, s);
    if (k == "rasterize_fwd") return run_rasterize_fwd<T>(c, d, s, cc_major);
    if (k == "rasterize_bwd") return run_rasterize_bwd<T>(c, d, s, cc_major, checks);
    if (k == "weight_stats") return run_weight_stats<T>(c, d, s);
    if (k == "contributors") return run_contributors<T>(c, d, s);
    throw std::runtime_error("unknown kernel '" + k + "'");
  };
  if (f64)
    dispatch(double{});
  else
    dispatch(float{});
}

int usage() {
  std::fprintf(stderr, "usage: kernel_driver CASES_DIR OUT_DIR [--only SUBSTRING] [--echo]\n");
  return 2;
}

}  // namespace
}  // namespace kdriver

int main(int argc, char** argv) {
  using namespace kdriver;
  std::vector<std::string> pos;
  std::string only;
  bool echo = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--echo") echo = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a.rfind("--", 0) == 0) return usage();
    else pos.push_back(a);
  }
  if (pos.size() != 2) return usage();
  const fs::path cases_dir = pos[0], out_dir = pos[1];
  std::vector<fs::path> cases;
  try {
    for (const auto& e : fs::directory_iterator(cases_dir))
      if (fs::exists(e.path() / "case.json") &&
          (only.empty() || e.path().filename().string().find(only) != std::string::npos))
        cases.push_back(e.path());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_driver: %s\n", e.what());
    return 2;
  }
  std::sort(cases.begin(), cases.end());
  fs::create_directories(out_dir);

  Json device = Json::object();
  int cc_major = 0;
  cudaStream_t stream = nullptr;
  if (!echo) {
    try {
      int dev = 0, minor = 0, rt = 0, drv = 0;
      cudaDeviceProp prop{};
      check(cudaGetDevice(&dev), "cudaGetDevice");
      check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
      check(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, dev), "cc");
      check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cc");
      cudaRuntimeGetVersion(&rt);
      cudaDriverGetVersion(&drv);
      check(cudaStreamCreate(&stream), "cudaStreamCreate");
      device.obj["name"] = Json::of(std::string(prop.name));
      device.obj["sm"] = Json::of(static_cast<double>(cc_major * 10 + minor));
      device.obj["runtime"] = Json::of(static_cast<double>(rt));
      device.obj["driver"] = Json::of(static_cast<double>(drv));
      std::printf("kernel_driver: %s (sm_%d%d), runtime %d, driver %d, %zu cases\n", prop.name,
                  cc_major, minor, rt, drv, cases.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kernel_driver: no usable CUDA device: %s\n", e.what());
      return 1;
    }
  }
  int errors = 0, skipped = 0;
  for (const fs::path& dir : cases) {
    Json meta = Json::object(), checks = Json::object();
    meta.obj["source"] = Json::of(fs::absolute(dir).string());
    meta.obj["driver"] = Json::of(std::string(echo ? "kernel_driver --echo" : "kernel_driver"));
    if (!echo) meta.obj["device"] = device;
    std::string status = "ok";
    Arrays outputs;
    Case c;
    try {
      c = read_case(dir);
      if (echo) {
        outputs = c.expected;
      } else {
        Device d(c);
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t cpu0 = std::clock();
        run_case(c, d, stream, cc_major, checks);
        check(cudaStreamSynchronize(stream), "kernel execution");
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        meta.obj["ms"] = Json::of(ms);
        // the host's CPU time: the whole run under the SIMT runtime, a shared machine's load aside
        meta.obj["cpu_ms"] = Json::of(1e3 * double(std::clock() - cpu0) / CLOCKS_PER_SEC);
        outputs = d.fetch();
      }
    } catch (const Skip& e) {
      status = std::string("skipped: ") + e.what();
      ++skipped;
    } catch (const std::exception& e) {
      status = std::string("error: ") + e.what();
      ++errors;
      // a sticky error (e.g. an illegal address) poisons the context: report the rest as such
      if (!echo && cudaDeviceSynchronize() != cudaSuccess) {
        std::fprintf(stderr, "%s: %s (context lost, stopping)\n", dir.filename().c_str(),
                     status.c_str());
        meta.obj["status"] = Json::of(status);
        meta.obj["checks"] = checks;
        if (!c.header.has("name")) return 1;
        write_result(out_dir / dir.filename(), c, {}, meta);
        return 1;
      }
    }
    meta.obj["status"] = Json::of(status);
    meta.obj["checks"] = checks;
    if (status != "ok") std::printf("%s: %s\n", dir.filename().c_str(), status.c_str());
    if (!c.header.has("name")) continue;  // unreadable case: nothing to name the result by
    try {
      write_result(out_dir / dir.filename(), c, status == "ok" ? outputs : Arrays{}, meta);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: cannot write the result: %s\n", dir.filename().c_str(), e.what());
      ++errors;
    }
  }
  std::printf("kernel_driver: %zu cases, %d errors, %d skipped\n", cases.size(), errors, skipped);
  if (stream) cudaStreamDestroy(stream);
  return errors ? 1 : 0;
}
