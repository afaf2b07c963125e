// Pre-included into every translation unit of the SIMT build (g++ -include), as nvcc pre-includes
// cuda_runtime.h (and with it the half / bfloat16 types) into every .cu file.
#pragma once
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
