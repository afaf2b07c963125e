// SIMT stand-in (tools/simt/simt.h)
#pragma once
#include "simt.h"
