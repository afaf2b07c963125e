// Whether the ops check tensor *values* (finite inputs, ranges, binning consistency) on CUDA.
// Shape, dtype and device checks are always on and read no data. Value checks read data, which
// on CUDA is a device→host sync that stalls the stream in a training loop, so on CUDA they run
// only when asked: GSRENDER_VALIDATE=1 at import, or gsrender.set_validation(True) (the tests
// run with it), or for one call: gsrender.rasterize(..., validate=True) sets a per-thread
// override for the duration of the call (and of its backward, which records it). On the CPU
// reading data costs no sync and the checks always run.
#pragma once

namespace gsrender {

// The per-thread override if one is set, else the global switch.
bool validation_enabled();
void set_validation(bool on);
// This thread's override: -1 none (follow the global switch), 0 off, 1 on. set_ returns the
// previous value, so a scope restores it.
int call_validation();
int set_call_validation(int v);
// Applies GSRENDER_VALIDATE (0/1, unset = 0); any other value is an error naming the variable.
void set_validation_from_env();

}  // namespace gsrender
