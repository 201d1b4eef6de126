"""An H100 80GB's memory on a larger GPU, for a GPU check when no H100 can be had (issue 54): on the
``PYTHONPATH`` with ``AUDIOICL_EMULATE_GIB`` set (78.6: what an H100 80GB HBM3 leaves PyTorch beside its CUDA
context), every Python process started caps the caching allocator there and reports free memory within the cap,
so that out-of-memory halvings and the KV budget are those of the smaller card. Timings are still the larger
card's: compare decodes, halvings and answers, not seconds.

    PYTHONPATH=src:benchmarks/emulate_80gb AUDIOICL_EMULATE_GIB=78.6 audioicl run ...
"""

import os

if os.environ.get("AUDIOICL_EMULATE_GIB"):
    import torch

    if torch.cuda.is_available():
        _limit = int(float(os.environ["AUDIOICL_EMULATE_GIB"]) * 2**30)
        torch.cuda.set_per_process_memory_fraction(
            _limit / torch.cuda.get_device_properties(0).total_memory, 0
        )
        _device_free = torch.cuda.mem_get_info

        def _capped_free(device=None):
            free, _ = _device_free(device)
            return min(free, _limit - torch.cuda.memory_reserved(device)), _limit

        torch.cuda.mem_get_info = _capped_free
