"""Kernel case files: one kernel's inputs, parameters and the CPU backend's outputs, stored as raw
little-endian arrays plus a small JSON header, so tools/kernel_driver (a torch-free CUDA program)
can run the CUDA kernels on them anywhere a CUDA runtime exists and write its outputs back as a
case for ``python -m gsrender.testing.check``. See docs/cuda.md.

- :mod:`gsrender.testing.case`: the format (writer / reader).
- :mod:`gsrender.testing.make_cases`: ``python -m gsrender.testing.make_cases OUT_DIR`` writes
  the standard set from the CPU backend.
- :mod:`gsrender.testing.check`: compares outputs with the stored CPU outputs (per-precision
  tolerances).
- :mod:`gsrender.testing.echo`: plays the driver without a GPU (expected → outputs, optionally
  perturbed), to test the checker and the case I/O.
"""
