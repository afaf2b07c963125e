// Every op schema of the gsrender library, in one place. Backends register their kernels with
// TORCH_LIBRARY_IMPL in csrc/cpu/*.cpp and csrc/cuda/*.cu; Python adds fake (meta) impls and
// autograd in gsrender/ops.py.
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <cstring>
#include <stdexcept>

#include "cpu/gaussian_checks.h"
#include "cpu/host_blocks.h"
#include "cpu/isa.h"
#include "gsrender/camera.h"
#include "gsrender/common.h"
#include "gsrender/raster_plan.h"
#include "gsrender/validation.h"

namespace {

// The CPU kernels' instruction set (csrc/cpu/isa.h), as Python functions of gsrender._C.
PyObject* isa_str(gsrender::cpu::Isa isa) { return PyUnicode_FromString(gsrender::cpu::isa_name(isa)); }

PyObject* py_cpu_isa(PyObject*, PyObject*) { return isa_str(gsrender::cpu::active_isa()); }

PyObject* isa_list(const std::vector<gsrender::cpu::Isa>& isas) {
  PyObject* out = PyList_New(0);
  for (gsrender::cpu::Isa isa : isas) {
    PyObject* s = isa_str(isa);
    PyList_Append(out, s);
    Py_DECREF(s);
  }
  return out;
}

PyObject* py_cpu_isas(PyObject*, PyObject*) { return isa_list(gsrender::cpu::runnable_isas()); }

PyObject* py_cpu_isa_copies(PyObject*, PyObject*) { return isa_list(gsrender::cpu::built_isas()); }

PyObject* py_set_cpu_isa(PyObject*, PyObject* arg) {
  const char* name = PyUnicode_AsUTF8(arg);
  if (!name) return nullptr;  // not a str: TypeError set
  try {
    return isa_str(gsrender::cpu::set_cpu_isa(name));
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::runtime_error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// The CPU outputs' huge-page blocks (cpu/host_blocks.h), for tests and benchmarks.
PyObject* py_host_blocks(PyObject*, PyObject*) {
  const gsrender::HostBlockStats s = gsrender::host_block_stats();
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n}", "live", Py_ssize_t(s.live), "cached",
                       Py_ssize_t(s.cached), "peak", Py_ssize_t(s.peak), "hits",
                       Py_ssize_t(s.hits), "fresh", Py_ssize_t(s.fresh), "blocks",
                       Py_ssize_t(s.blocks));
}

PyObject* py_install_host_allocator(PyObject*, PyObject*) {
  return PyBool_FromLong(gsrender::install_host_allocator());
}

// The rendering contract's thresholds (gsrender/common.h) and the rasterizer's channel limit
// (gsrender/raster_plan.h): Python's float64 reference and the tests read them here, so each
// has one definition.
PyObject* py_contract(PyObject*, PyObject*) {
  return Py_BuildValue("{s:d,s:d,s:d,s:d,s:L}", "alpha_min", gsrender::kAlphaMin, "alpha_min_inv",
                       gsrender::kAlphaMinInv, "alpha_max", gsrender::kAlphaMax,
                       "transmittance_min", gsrender::kTransmittanceMin, "max_raster_channels",
                       static_cast<long long>(gsrender::kMaxRasterChannels));
}

// The rasterize plan's names (gsrender/raster_plan.h), indexed by the enums' values: Python's
// names for the kernels and precisions are these.
PyObject* names_list(const char* const* names, int n) {
  PyObject* out = PyList_New(n);
  for (int i = 0; i < n; ++i) PyList_SET_ITEM(out, i, PyUnicode_FromString(names[i]));
  return out;
}

PyObject* py_raster_kernels(PyObject*, PyObject*) {
  return names_list(gsrender::kRasterKernelNames, gsrender::kNumRasterKernels);
}

PyObject* py_raster_precisions(PyObject*, PyObject*) {
  return names_list(gsrender::kRasterPrecisionNames, gsrender::kNumRasterPrecisions);
}

PyObject* py_raster_modes(PyObject*, PyObject*) {
  return names_list(gsrender::kRasterModeNames, gsrender::kNumRasterModes);
}

// The projection's lens models (gsrender/camera.h), by the op's camera_model value.
PyObject* py_camera_models(PyObject*, PyObject*) {
  return names_list(gsrender::kCameraModelNames, gsrender::kNumCameraModels);
}

PyObject* py_raster_plan_fields(PyObject*, PyObject*) {
  return names_list(gsrender::kPlanFieldNames, gsrender::kPlanFields);
}

// plan_raster(precision, sorted, deterministic, cuda, float32, tile_size, cc_major) ->
// (forward, backward) kernel values: the plan rasterize_fwd makes for that target, for any
// target (the CUDA plans are testable, and written into kernel cases, without a GPU).
PyObject* py_plan_raster(PyObject*, PyObject* args) {
  const char* precision;
  int sorted, deterministic, cuda, float32, tile_size, cc_major;
  if (!PyArg_ParseTuple(args, "sppppii", &precision, &sorted, &deterministic, &cuda, &float32,
                        &tile_size, &cc_major))
    return nullptr;
  gsrender::RasterPrecision p;
  if (!gsrender::parse_raster_precision(precision, std::strlen(precision), &p)) {
    PyErr_Format(PyExc_ValueError, "precision must be one of %s, got '%s'",
                 gsrender::kRasterPrecisionChoices, precision);
    return nullptr;
  }
  const gsrender::RasterPlan plan = gsrender::make_raster_plan(
      p, sorted, deterministic, {cuda != 0, float32 != 0, tile_size, cc_major});
  return Py_BuildValue("(LL)", static_cast<long long>(plan.forward),
                       static_cast<long long>(plan.backward));
}

// gaussian_faults(means, quats, scales, opacities) -> int: render.py's value checks of the
// Gaussians on the CPU in one pass (cpu/gaussian_checks.h: the bits).
PyObject* py_gaussian_faults(PyObject*, PyObject* args) {
  PyObject* t[4];
  if (!PyArg_ParseTuple(args, "OOOO", &t[0], &t[1], &t[2], &t[3])) return nullptr;
  for (PyObject* x : t)
    if (!THPVariable_Check(x)) {
      PyErr_SetString(PyExc_TypeError, "gaussian_faults(means, quats, scales, opacities) takes tensors");
      return nullptr;
    }
  try {
    return PyLong_FromUnsignedLong(gsrender::gaussian_faults(
        THPVariable_Unpack(t[0]), THPVariable_Unpack(t[1]), THPVariable_Unpack(t[2]),
        THPVariable_Unpack(t[3])));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* py_validation(PyObject*, PyObject*) { return PyBool_FromLong(gsrender::validation_enabled()); }

PyObject* py_set_validation(PyObject*, PyObject* arg) {
  if (!PyBool_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_validation(on): on must be a bool");
    return nullptr;
  }
  gsrender::set_validation(arg == Py_True);
  Py_RETURN_NONE;
}

PyObject* py_call_validation(PyObject*, PyObject*) {
  return PyLong_FromLong(gsrender::call_validation());
}

PyObject* py_set_call_validation(PyObject*, PyObject* arg) {
  const long v = PyLong_AsLong(arg);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  if (v < -1 || v > 1) {
    PyErr_Format(PyExc_ValueError, "set_call_validation(v): v must be -1, 0 or 1, got %ld", v);
    return nullptr;
  }
  return PyLong_FromLong(gsrender::set_call_validation(static_cast<int>(v)));
}

PyMethodDef methods[] = {
    {"contract", py_contract, METH_NOARGS,
     "contract() -> dict: the alpha cut (and its reciprocal), alpha clamp, transmittance stop "
     "and the rasterizer's channel limit"},
    {"raster_kernels", py_raster_kernels, METH_NOARGS,
     "raster_kernels() -> list[str]: the rasterize kernels' names, by the plan's values"},
    {"raster_precisions", py_raster_precisions, METH_NOARGS,
     "raster_precisions() -> list[str]: the precision strings rasterize_fwd takes"},
    {"raster_modes", py_raster_modes, METH_NOARGS,
     "raster_modes() -> list[str]: rasterize's modes, by the op's mode value"},
    {"camera_models", py_camera_models, METH_NOARGS,
     "camera_models() -> list[str]: the projection's lens models, by the op's camera_model value"},
    {"raster_plan_fields", py_raster_plan_fields, METH_NOARGS,
     "raster_plan_fields() -> list[str]: the entries of rasterize's plan tensor, in order"},
    {"plan_raster", py_plan_raster, METH_VARARGS,
     "plan_raster(precision, sorted, deterministic, cuda, float32, tile_size, cc_major) -> "
     "(forward, backward): the kernels rasterize_fwd would plan for that target"},
    {"gaussian_faults", py_gaussian_faults, METH_VARARGS,
     "gaussian_faults(means, quats, scales, opacities) -> int: the Gaussians' faults (CPU)"},
    {"validation", py_validation, METH_NOARGS,
     "validation() -> bool: whether CUDA calls check tensor values (gsrender/validation.h)"},
    {"set_validation", py_set_validation, METH_O,
     "set_validation(on: bool): check tensor values on CUDA too (a host sync per check)"},
    {"call_validation", py_call_validation, METH_NOARGS,
     "call_validation() -> int: this thread's per-call override (-1 none, 0 off, 1 on)"},
    {"set_call_validation", py_set_call_validation, METH_O,
     "set_call_validation(v: int) -> int: set this thread's override, return the previous one"},
    {"host_blocks", py_host_blocks, METH_NOARGS,
     "host_blocks() -> dict: the CPU outputs' huge-page blocks: live, cached, peak bytes, hits, "
     "fresh, blocks (cached)"},
    {"install_host_allocator", py_install_host_allocator, METH_NOARGS,
     "install_host_allocator() -> bool: every CPU tensor of 128 KB or more from the block cache "
     "(cpu/host_blocks.h); False if PyTorch kept another allocator"},
    {"cpu_isa", py_cpu_isa, METH_NOARGS, "cpu_isa() -> str: the ISA the CPU kernels run now"},
    {"cpu_isas", py_cpu_isas, METH_NOARGS,
     "cpu_isas() -> list[str]: the ISAs this CPU runs and this build compiled, best first"},
    {"cpu_isa_copies", py_cpu_isa_copies, METH_NOARGS,
     "cpu_isa_copies() -> list[str]: the copies this build compiled (GSRENDER_CPU_ISA_BUILD), best first"},
    {"set_cpu_isa", py_set_cpu_isa, METH_O,
     "set_cpu_isa(name) -> str: run the CPU kernels' auto|avx512|avx2|baseline copy from now on"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

extern "C" {
// Importing gsrender._C loads this library, which runs the static registrations below, and
// applies GSRENDER_CPU_ISA (an ISA this CPU cannot run fails the import, naming the variable)
// and GSRENDER_VALIDATE.
PyObject* PyInit__C(void) {
  try {
    gsrender::cpu::set_cpu_isa_from_env();
    gsrender::set_validation_from_env();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};
  return PyModule_Create(&module_def);
}
}

TORCH_LIBRARY(gsrender, m) {
  // EWA projection of 3D Gaussians into C cameras (docs/design.md §3) of one lens model
  // (docs/cameras.md): camera_model 0 pinhole, 1 ortho, 2 fisheye (gsrender/camera.h).
  // means [N,3], quats [N,4] wxyz, scales [N,3], opacities [N], viewmats [C,4,4], Ks [C,3,3]
  // -> radii [C,N,2] int32 (0 = culled), means2d [C,N,2], depths [C,N], conics [C,N,3],
  //    opacities2d [C,N] (opacity × antialiasing compensation; 0 where culled)
  m.def(
      "project_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor viewmats, "
      "Tensor Ks, int width, int height, float eps2d, float near_plane, float far_plane, "
      "float radius_clip, bool antialiased, int camera_model=0) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  // -> v_means [N,3], v_quats [N,4], v_scales [N,3], v_opacities [N], v_viewmats [C,4,4]
  m.def(
      "project_bwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor viewmats, "
      "Tensor Ks, int width, int height, float eps2d, bool antialiased, Tensor radii, "
      "Tensor v_means2d, Tensor v_depths, Tensor v_conics, Tensor v_opacities2d, "
      "int camera_model=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");

  // Real spherical harmonics up to degree 3 (3DGS constants), without the +0.5 offset.
  // dirs [C,N,3] (normalised inside), coeffs [N,K,3] with K >= (degree+1)^2 -> colors [C,N,3]
  m.def("sh_fwd(int degree, Tensor dirs, Tensor coeffs) -> Tensor");
  // -> v_dirs [C,N,3], v_coeffs [N,K,3]
  m.def("sh_bwd(int degree, Tensor dirs, Tensor coeffs, Tensor v_colors) -> (Tensor, Tensor)");

  // The raster's channels in one pass (CPU): colour = max(SH(means[n] - campos[c]) + 0.5, 0),
  // the 3DGS colour, then the depth, then the features. means [N,3], campos [C,3] (camera
  // centres), coeffs [N,K,3], depths [C,N], features [N,D] (shared) or [C,N,D] or None
  // -> channels [C,N,4+D]
  m.def(
      "sh_channels_fwd(int degree, Tensor means, Tensor campos, Tensor coeffs, Tensor depths, "
      "Tensor? features) -> Tensor");
  // The colour's backward (the depth and feature channels pass their gradients through as they
  // are): v_channels [C,N,CH], CH >= 3 -> v_means [N,3], v_campos [C,3], v_coeffs [N,K,3]
  m.def(
      "sh_channels_bwd(int degree, Tensor means, Tensor campos, Tensor coeffs, Tensor v_channels) "
      "-> (Tensor, Tensor, Tensor)");

  // Tile binning: every (camera, tile, Gaussian) intersection of the radii boxes, grouped by
  // (camera, tile) and, when sort=True, ordered by depth inside a tile (stable otherwise).
  // With conics [C,N,3] and opacities [C,N] (exact binning) only the tiles of the box that the
  // Gaussian's α >= 1/255 support ellipse meets (gsrender/support_ellipse.h): the others could
  // never contribute, so every raster op gives the same result on the shorter lists.
  // means2d [C,N,2], radii [C,N,2] int32, depths [C,N]
  // -> tile_offsets [C,TH,TW] int32 (start of each tile's run), flatten_ids [M] int32 (c*N+n)
  m.def(
      "bin_tiles(Tensor means2d, Tensor radii, Tensor depths, int width, int height, "
      "int tile_size, bool sort, Tensor? conics=None, Tensor? opacities=None) "
      "-> (Tensor, Tensor)");

  // Per-pixel accumulation in the matrix formulation (docs/design.md §4). colors carries every channel
  // rendered in this pass (RGB, depth, features): [C,N,CH]. mode 0 = sorted, 1 = weighted
  // (weight_params = [sigma, beta, w_bg]). precision: 'fp32' = the exact scalar per-pixel loop
  // (CPU weighted mode: the fp32 GEMM), 'auto' / 'fp16' / 'bf16' / 'tf32' = the matrix kernel
  // (CUDA: Tensor Core operands of that type, 'auto' = fp16, where they run; the CPU runs an fp32
  // GEMM for all). deterministic: the backward this forward plans reduces in a fixed order.
  // The op makes the launch plan (gsrender/raster_plan.h) once and returns it.
  // means2d [C,N,2], conics [C,N,3], opacities [C,N], depths [C,N], backgrounds [C,CH] or None
  // -> render [C,H,W,CH], alphas [C,H,W,1], last_ids [C,H,W] int32 (one past the last tile-list
  //    entry a pixel used), aux [C,H,W] (weighted mode: the weight sum; sorted: T_final),
  //    stats [C,3] int64 (tile-list pairs, packed pairs evaluated, pairs that contributed),
  //    plan [8] int64 on the CPU (RasterPlan in store_plan's layout: the forward and backward
  //    kernel as RasterKernel values, the tile grid, the two kernels' device workspace bytes)
  m.def(
      "rasterize_fwd(Tensor means2d, Tensor conics, Tensor opacities, Tensor colors, "
      "Tensor depths, Tensor? backgrounds, Tensor tile_offsets, Tensor flatten_ids, int width, "
      "int height, int tile_size, int mode, float[] weight_params, str precision=\"auto\", "
      "bool deterministic=False) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  // -> v_means2d [C,N,2], v_conics [C,N,3], v_opacities [C,N], v_colors [C,N,CH],
  //    v_depths [C,N] (weighted mode only; zeros when sorted), v_backgrounds [C,CH]; plan: the
  //    forward's, whose backward kernel runs (Tensor Core for f16/bf16 forwards, the fixed-order
  //    det_reduce.h reduction when the forward was asked for deterministic) on its tile grid
  //    (checked against these inputs) with its backward workspace
  m.def(
      "rasterize_bwd(Tensor means2d, Tensor conics, Tensor opacities, Tensor colors, "
      "Tensor depths, Tensor? backgrounds, Tensor tile_offsets, Tensor flatten_ids, int width, "
      "int height, int tile_size, int mode, float[] weight_params, Tensor render, Tensor alphas, "
      "Tensor last_ids, Tensor aux, Tensor v_render, Tensor v_alphas, Tensor plan) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");

  // SplitGS-Loc composition-weight statistics (sorted-mode weights w = α·T, docs/design.md §7), over the
  // C views of one binning. Same projected inputs as rasterize_fwd.
  // -> w_sum [N] (Σw over views and pixels), w_max [N], n_views [N] int32 (views in which the
  //    Gaussian has w > tau_s at some pixel), topk_ids [C,H,W,top_k] int32 (-1 = none; by
  //    descending weight), topk_weights [C,H,W,top_k]
  m.def(
      "weight_stats(Tensor means2d, Tensor conics, Tensor opacities, Tensor depths, "
      "Tensor tile_offsets, Tensor flatten_ids, int width, int height, int tile_size, "
      "float tau_s, int top_k) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");

  // VODA depth-aware contributors (docs/design.md §7). Per pixel, its front-to-back
  // contributors in sorted mode (same α, 1/255 cut, 0.99 clamp and order as rasterize_fwd), with
  // weight w = α·T and view depth z, grouped into depth clusters: entry k opens a new cluster
  // when z_k − z_{k−1} > tau_rel·z_{k−1} + tau_abs. The walk goes past the renderer's stop
  // (T·(1−α) < 1e-4, T keeps multiplying) until the cluster open at the stop closes; at most
  // K_max entries. pixels [C,P,2] int32 (x, y), (-1, -1) = padding, or None = every pixel
  // (P = H·W, row-major). Other inputs as rasterize_fwd (bin_tiles with sort=True).
  // -> ids [C,P,K] int32 (Gaussian index n; -1 past count), weights [C,P,K], zs [C,P,K],
  //    clusters [C,P,K] int32 (0, 1, … per pixel; -1 past count), counts [C,P] int32 (entries
  //    listed), n_render [C,P] int32 (the first n_render entries are the renderer's: their
  //    weights sum to the rendered alpha unless K_max cut the list)
  m.def(
      "contributors(Tensor means2d, Tensor conics, Tensor opacities, Tensor depths, "
      "Tensor tile_offsets, Tensor flatten_ids, int width, int height, int tile_size, "
      "Tensor? pixels, int K_max, float tau_rel, float tau_abs) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");

  // The SSIM map of the training loss (gsrender.metrics; CPU kernel): Gaussian-window moments of
  // x and y (window along W then H, zero padding, F.conv2d's correlation) and the SSIM formula
  // with constants c1, c2, per channel. x, y [B,H,W,CH], window [K] (K odd)
  // -> ssim [B,H,W,CH], moments [5,B*CH,H,W] (B(x), B(y), B(x²), B(y²), B(xy), for the backward)
  m.def("ssim_fwd(Tensor x, Tensor y, Tensor window, float c1, float c2) -> (Tensor, Tensor)");
  // -> v_x [B,H,W,CH], v_y [B,H,W,CH] ([0,H,W,CH] unless y_grad)
  m.def(
      "ssim_bwd(Tensor x, Tensor y, Tensor window, float c1, float c2, Tensor moments, "
      "Tensor v_ssim, bool y_grad) -> (Tensor, Tensor)");
}
