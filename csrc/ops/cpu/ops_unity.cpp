// The CPU ops' torch glue as one translation unit. Each glue file alone spends most of its
// 13-21 CPU-s of compile time parsing torch's headers; compiled together they parse them once.
// setup.py compiles this file instead of the ones it includes (it reads the list below), so a
// file is either here or compiled on its own, never both. Each glue file keeps its helpers in
// its own anonymous namespace under a name no other glue file uses.
#include "binning.cpp"
#include "contributors.cpp"
#include "project_sh_checks.cpp"
#include "projection.cpp"
#include "rasterize_bwd.cpp"
#include "rasterize_fwd.cpp"
#include "sh.cpp"
#include "ssim.cpp"
#include "weight_stats.cpp"
