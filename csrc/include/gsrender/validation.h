// Whether the ops check tensor *values* (finite inputs, ranges, binning consistency) on CUDA.
// Shape, dtype and device checks are always on and read no data. Value checks read data, which
// on CUDA is a device→host sync that stalls the stream in a training loop, so on CUDA they run
// only when asked: GSRENDER_VALIDATE=1 at import, or gsrender.set_validation(True) (the tests
// run with it). On the CPU reading data costs no sync and the checks always run.
#pragma once

namespace gsrender {

bool validation_enabled();
void set_validation(bool on);
// Applies GSRENDER_VALIDATE (0/1, unset = 0); any other value is an error naming the variable.
void set_validation_from_env();

}  // namespace gsrender
