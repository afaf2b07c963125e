// Included first by the CPU's pixel kernels (rasterize_fwd / _bwd, weight_stats, contributors,
// ssim): GCC's FMA contraction back on for the rest of the translation unit. setup.py builds the
// CPU code with -ffp-contract=off, so the per-Gaussian kernels (projection, SH, binning) round
// alike in every ISA copy and their 8-lane versions give the scalar code's bits (docs/cpu.md,
// "Per-Gaussian stages"). The pixel kernels need no such equality across copies (the
// tests hold them to float32 tolerances), and their register-blocked accumulations lose to it:
// without contraction the 100k forward raster took 14 % more CPU time (D = 0) and 19 % more at
// D = 64, and written with explicit per-lane fma the D = 64 blocks spilled an accumulator. With
// this they run as fast as before the flag (docs/cpu.md, "Floating-point contraction per translation unit").
#pragma once
#pragma GCC optimize("fp-contract=fast")
