"""`gsrender info`: versions, backends, the CPU instruction-set copy, which ops have kernels."""
from __future__ import annotations

import json
import sys

import torch

import gsrender
from gsrender import _C
from gsrender.cli.common import op_backends


def add_parser(sub) -> None:
    i = sub.add_parser("info", help="versions, backends and which ops have kernels")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.set_defaults(func=cmd_info)


def info_dict() -> dict:
    backends = op_backends()
    cuda_build = any(b["CUDA"] for b in backends.values())
    cuda_avail = torch.cuda.is_available()
    avail = ["cpu"] + (["cuda"] if cuda_avail and cuda_build else [])
    return {
        "gsrender": gsrender.__version__,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "threads": torch.get_num_threads(),
        "cuda_available": cuda_avail,
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if cuda_avail else [],
        "compiled_with_cuda": cuda_build,
        "backends": avail,
        # the CPU kernels' instruction-set copy in use, those this CPU runs of the copies built,
        # and the copies built (GSRENDER_CPU_ISA_BUILD), best first
        "cpu_isa": _C.cpu_isa(),
        "cpu_isas": _C.cpu_isas(),
        "cpu_isa_copies": _C.cpu_isa_copies(),
        "ops": backends,
        "missing_cpu_kernels": [op for op, b in backends.items() if not b["CPU"]],
    }


def cmd_info(args) -> int:
    d = info_dict()
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    yn = lambda b: "yes" if b else "no"
    print(f"gsrender {d['gsrender']}  (torch {d['torch']}, CUDA runtime {d['torch_cuda']}, "
          f"Python {d['python']}, {d['threads']} CPU threads)")
    print(f"compiled with CUDA kernels: {yn(d['compiled_with_cuda'])}")
    print(f"CUDA device available: {yn(d['cuda_available'])}"
          + (f" ({', '.join(d['cuda_devices'])})" if d["cuda_devices"] else ""))
    print(f"backends: {', '.join(d['backends'])}")
    print(f"CPU kernels: {d['cpu_isa']} copy (this CPU runs {', '.join(d['cpu_isas'])}; built: "
          f"{', '.join(d['cpu_isa_copies'])}; GSRENDER_CPU_ISA=auto|avx512|avx2|baseline chooses)")
    print(f"  {'op':<15} {'CPU':>4} {'CUDA':>5}")
    for op, b in d["ops"].items():
        print(f"  {op:<15} {yn(b['CPU']):>4} {yn(b['CUDA']):>5}")
    if d["missing_cpu_kernels"]:
        print(f"note: no CPU kernel yet for {', '.join(d['missing_cpu_kernels'])}; rendering needs them")
    return 0
