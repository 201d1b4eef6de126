"""The reuse path's faster kernels, each behind a switch (``-o compile=``, ``-o cuda_graphs=``, auto|on|off):
fused elementwise work in the decoder (``torch.compile`` of its RMSNorms and dense MLPs) and the decode step
replayed as a CUDA graph (the step reads fixed buffers, so one capture per batch serves its every step).

``auto``: CUDA graphs on where there is a CUDA device, compile off (measured in docs/measurements.md: a
tenth off Qwen2-Audio's prefill, but slower on Qwen2.5-Omni, whose batches recompile). A path that cannot be used (no
CUDA device, a capture or compile that fails) falls back to plain eager kernels: said once in the log, and
recorded in the backend info with why, so the run record tells which kernels made the answers. Neither path
changes what is computed, only how it is launched (fusion may round bf16 differently; fp32 agrees to the last
bit on the CPU in tests/test_graphs.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

SPEED_MODES = ("auto", "on", "off")
log = logging.getLogger("audioicl.backends")


@dataclass
class FastPaths:
    """Which fast paths this backend runs, and for each asked for but not running, why."""

    compile: bool
    cuda_graphs: bool
    asked: dict[str, str]  # path → what the options asked (auto|on|off)
    why_not: dict[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(cls, compile: str, cuda_graphs: str, device: torch.device) -> FastPaths:
        """The paths ``auto`` or ``on`` turn on for ``device`` (module docstring); ``on`` where a path
        cannot run falls back."""
        paths = cls(compile == "on", cuda_graphs != "off", {"compile": compile, "cuda_graphs": cuda_graphs})
        if device.type != "cuda":
            if cuda_graphs == "auto":
                paths.cuda_graphs = False
            if paths.cuda_graphs:
                paths.give_up("cuda_graphs", f"CUDA graphs need a CUDA device, this run is on {device}")
        return paths

    def give_up(self, path: str, why: str) -> None:
        """Turn ``path`` off for the rest of the run; say so once."""
        if getattr(self, path):
            setattr(self, path, False)
            self.why_not[path] = why
            log.warning("hf backend: %s off, falling back to eager kernels: %s", path, why)

    def info(self) -> dict[str, Any]:
        """For the run record: each path's setting, whether it runs, and why not."""
        made = {
            path: {"asked": asked, "used": bool(getattr(self, path))} for path, asked in self.asked.items()
        }
        for path, why in self.why_not.items():
            made[path]["fallback"] = why
        return made


# --------------------------------------------------------------------------- fused elementwise work


def text_model(decoder: Any) -> Any:
    """The module holding the decoder's ``layers`` (a thinker's text model holds them under
    ``language_model``)."""
    return decoder if hasattr(decoder, "layers") else decoder.language_model


def compiled_modules(decoder: Any) -> list[torch.nn.Module]:
    """The decoder's modules whose work is elementwise around matmuls: every RMSNorm and every dense MLP
    (SiLU x up). Attention (it writes the KV cache) and MoE blocks (data-dependent routing) stay eager."""
    decoder = text_model(decoder)
    found: list[torch.nn.Module] = []
    for layer in decoder.layers:
        found += [layer.input_layernorm, layer.post_attention_layernorm]
        if hasattr(layer.mlp, "gate_proj"):
            found.append(layer.mlp)
    found.append(decoder.norm)
    return found


def compile_decoder(decoder: Any, backend: str = "inductor") -> int:
    """Compile ``compiled_modules(decoder)`` in place (``nn.Module.compile``: names and weights unchanged),
    with dynamic shapes so that every batch's shape runs the same kernels; how many were compiled."""
    modules = compiled_modules(decoder)
    for module in modules:
        module.compile(backend=backend, dynamic=True)
    return len(modules)


def uncompile_decoder(decoder: Any) -> None:
    """Undo ``compile_decoder``: the modules run their own forward again."""
    for module in compiled_modules(decoder):
        module._compiled_call_impl = None


def compile_failure(exc: BaseException) -> bool:
    """An error of the compiler (dynamo, inductor, triton), not of the model or of memory."""
    name = type(exc).__module__ + "." + type(exc).__name__
    return any(part in name for part in ("torch._dynamo", "torch._inductor", "triton")) or (
        "BackendCompilerFailed" in name
    )


# --------------------------------------------------------------------------- CUDA graphs


class Replay:
    """``step()`` (a function of fixed input buffers returning a tensor) captured once as a CUDA graph;
    calling it replays the graph and returns the same output buffer, overwritten."""

    def __init__(self, step: Callable[[], torch.Tensor]):
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: the runner's preparing thread extracts features on the GPU during the capture
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.out = step()

    def __call__(self) -> torch.Tensor:
        self.graph.replay()
        return self.out


def replayed(step: Callable[[], torch.Tensor], paths: FastPaths) -> Callable[[], torch.Tensor]:
    """``step`` as a CUDA graph where ``paths`` allow it, else ``step`` itself; a capture that fails for any
    reason but memory turns CUDA graphs off for the run (the step then runs eagerly, its inputs untouched:
    nothing captured has run)."""
    if not paths.cuda_graphs:
        return step
    try:
        return Replay(step)
    except torch.cuda.OutOfMemoryError:
        raise
    except RuntimeError as exc:
        if "out of memory" in str(exc).lower():
            raise
        torch.cuda.synchronize()
        paths.give_up("cuda_graphs", f"the decode step cannot be captured: {first_line(exc)}")
        return step


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name where it has none), for a one-line log."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def compiled_or_eager(run: Callable[[], Any], decoder: Any, paths: FastPaths) -> Any:
    """``run()``; where the compiler fails in it, the decoder's modules uncompiled, compile turned off for
    the run, and ``run()`` again (it starts over: nothing of the failed attempt is kept)."""
    try:
        return run()
    except Exception as exc:
        if not (paths.compile and compile_failure(exc)):
            raise
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    uncompile_decoder(decoder)
    paths.give_up("compile", f"torch.compile failed: {error}")
    return run()
