"""The reuse path's faster kernels, each behind a switch (``-o compile=``, ``-o fused=``, ``-o cuda_graphs=``,
auto|on|off): fused elementwise work in the decoder (its RMSNorms and dense MLPs, through ``torch.compile`` or
through the Triton kernels of ``backends.kernels``) and the decode step replayed as a CUDA graph (the step reads
fixed buffers, so one capture per batch serves its every step).

``auto``: CUDA graphs and the Triton kernels on where there is a CUDA device, compile off (measured in
docs/measurements.md: a tenth off Qwen2-Audio's prefill, but slower on Qwen2.5-Omni, whose batches recompile;
compile and the Triton kernels take the same modules, so ``compile=on`` turns the kernels off). A path that
cannot be used (no CUDA device, no Triton, a capture or compile that fails) falls back to plain eager kernels:
said once in the log, and recorded in the backend info with why, so the run record tells which kernels made the
answers. No path changes what is computed, only how it is launched (fusion may round bf16 differently; fp32
agrees on the CPU in tests/backends/hf/test_graphs.py and tests/backends/hf/test_kernels.py).
"""

from __future__ import annotations

import logging
import os
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import torch

log = logging.getLogger("audioicl.backends")


@dataclass
class FastPaths:
    """Which fast paths this backend runs, and for each asked for but not running, why."""

    compile: bool
    cuda_graphs: bool
    asked: dict[str, str]  # path → what the options asked (auto|on|off)
    why_not: dict[str, str] = field(default_factory=dict)
    fused: bool = False

    @classmethod
    def resolve(cls, compile: str, cuda_graphs: str, device: torch.device, fused: str = "off") -> FastPaths:
        """The paths ``auto`` or ``on`` turn on for ``device`` (module docstring); ``on`` where a path
        cannot run falls back."""
        asked = {"compile": compile, "cuda_graphs": cuda_graphs, "fused": fused}
        paths = cls(compile == "on", cuda_graphs != "off", asked, fused=fused != "off")
        if fused == "auto" and (paths.compile or device.type != "cuda"):
            paths.fused = False
        # where TRITON_INTERPRET=1 (the tests), ``on`` runs the kernels on the CPU through Triton's interpreter
        triton_runs_here = device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"
        if paths.compile:
            paths.give_up("fused", "compile=on fuses the same modules")
        if not triton_runs_here:
            paths.give_up("fused", f"the fused kernels (Triton) need a CUDA device, this run is on {device}")
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


# --------------------------------------------------------------------------- fused kernels (Triton)


def fused_modules(decoder: Any) -> list[torch.nn.Module]:
    """The modules of the decoder's layers, and its final norm, shaped like one the kernels can stand in for
    (``_kernel_for``): its RMSNorms (per-head ones of queries and keys too) and dense MLPs, whatever a family
    names them; ``_probe`` decides which compute what the kernels do."""
    text = text_model(decoder)
    return [module for module in (*text.layers.modules(), text.norm) if _kernel_for(module)]


@dataclass(frozen=True)
class FusedFunction:
    """A function of a modeling module (``namespace``) the decoder's layers call by its global ``name``
    (transformers' ``apply_rotary_pos_emb``), and the kernels' version of it, for ``layers`` layers."""

    namespace: types.ModuleType
    name: str
    fused: Callable
    layers: int


@dataclass
class Fusion:
    """The Triton kernels' forward for each module of a decoder that takes them, and its functions' fused
    versions (``fuse_decoder``), in force only inside ``applied()``: the reuse path's calls, so that
    transformers' own ``generate`` over the same model (``reuse=off``, a benchmark's baseline) runs its own
    kernels."""

    forwards: list[tuple[torch.nn.Module, Callable]]
    functions: list[FusedFunction] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many modules of each class, and layers of each function, take the kernels, for the run
        record."""
        made = Counter(type(module).__name__ for module, _ in self.forwards)
        made.update({function.name: function.layers for function in self.functions})
        return dict(made)

    @contextmanager
    def applied(self) -> Iterator[None]:
        originals = [getattr(function.namespace, function.name) for function in self.functions]
        for module, forward in self.forwards:
            module.forward = types.MethodType(forward, module)
        for function in self.functions:
            setattr(function.namespace, function.name, function.fused)
        try:
            yield
        finally:
            for module, _ in self.forwards:
                module.__dict__.pop("forward", None)
            for function, original in zip(self.functions, originals, strict=True):
                setattr(function.namespace, function.name, original)


def fuse_decoder(decoder: Any) -> Fusion:
    """The Triton kernels (``backends.kernels``) for each module of ``fused_modules(decoder)`` whose class
    passes ``_probe``. Raises what the kernels raise on this device (no Triton, a kernel that does not
    compile)."""
    from . import kernels  # Triton is imported only where the kernels are asked for

    modules = fused_modules(decoder)
    forwards: dict[type, Callable | None] = {}
    for module in modules:
        if type(module) not in forwards:
            forwards[type(module)] = _probe(module, kernels)
    fused = [(module, forward) for module in modules if (forward := forwards[type(module)])]
    return Fusion(fused, _fused_rotary(decoder, kernels))


ROTARY = "apply_rotary_pos_emb"  # the name transformers' attention calls its rotary embedding by


def _fused_rotary(decoder: Any, kernels: Any) -> list[FusedFunction]:
    """``kernels.rotary`` for the rotary embedding of each modeling module whose attention layers call
    ``ROTARY(q, k, cos, sin)`` and where, on random queries and keys shaped as the layer's, it gives what the
    module's own function does (Gemma 4's takes one tensor at a time: not fused)."""
    by_namespace: dict[str, list[Any]] = {}
    for layer in text_model(decoder).layers:
        attention = getattr(layer, "self_attn", None)
        if attention is not None:
            by_namespace.setdefault(type(attention).__module__, []).append(attention)
    made = []
    for name, attentions in by_namespace.items():
        namespace = sys.modules[name]
        original = getattr(namespace, ROTARY, None)
        if original is None:
            continue
        fused = _rotary_of(original, kernels)
        if _rotary_agrees(original, fused, attentions[0]):
            made.append(FusedFunction(namespace, ROTARY, fused, len(attentions)))
    return made


def _rotary_of(original: Callable, kernels: Any) -> Callable:
    """``original(q, k, cos, sin)`` through ``kernels.rotary`` where its arguments are the usual ones (heads
    second, cos/sin [rows, positions, head dim]); any other call goes to ``original``."""

    def fused(q: Any, k: Any, cos: Any, sin: Any, unsqueeze_dim: int = 1, *args: Any, **kwargs: Any) -> Any:
        usual = (
            isinstance(unsqueeze_dim, int)  # not an older signature's position ids
            and unsqueeze_dim == 1
            and q.dtype == k.dtype == cos.dtype == sin.dtype
            and q.dtype in kernels.ROTARY_DTYPES
            and not args
            and not kwargs
            and q.dim() == k.dim() == 4
            and cos.dim() == 3
            and cos.shape == sin.shape
            and cos.shape[-1] == q.shape[-1] == k.shape[-1]
        )
        if not usual:
            return original(q, k, cos, sin, unsqueeze_dim, *args, **kwargs)
        return kernels.rotary(q, cos, sin), kernels.rotary(k, cos, sin)

    return fused


def _rotary_agrees(original: Callable, fused: Callable, attention: Any) -> bool:
    """Whether ``fused`` gives ``original``'s queries and keys for random ones shaped as ``attention``
    makes them (its projections' widths over its head dim); False where the module's function does not take
    them so, or the attention has no such projections."""
    dim = getattr(attention, "head_dim", None)
    projections = [getattr(attention, name, None) for name in ("q_proj", "k_proj")]
    if not isinstance(dim, int) or dim % 2 or any(p is None for p in projections):
        return False
    dtype, device = _compute_dtype_device(projections[0])
    generator = torch.Generator(device).manual_seed(0)

    def projected(linear: Any) -> torch.Tensor:
        x = torch.randn(2, 3, linear.out_features // dim, dim, generator=generator, device=device)
        return x.to(dtype).transpose(1, 2)

    q, k = projected(projections[0]), projected(projections[1])
    cos, sin = (torch.randn(2, 3, dim, generator=generator, device=device).to(dtype) for _ in range(2))
    with torch.inference_mode():
        try:
            own = original(q, k, cos, sin)
        except (TypeError, ValueError, RuntimeError, AttributeError):  # not the usual signature
            return False
        made = fused(q, k, cos, sin)
    return all(
        a.shape == b.shape
        and float((a.float() - b.float()).abs().max()) <= 2**-6 * float(a.abs().max()) + 1e-6
        for a, b in zip(own, made, strict=True)
    )


def _compute_dtype_device(linear: Any) -> tuple[torch.dtype, torch.device]:
    """The dtype a linear layer computes in and its device: an nn.Linear's weight's, or the FP8 condition's
    (``fp8.RowwiseFP8Linear``: no ``weight``, its ``compute_dtype``)."""
    held = linear.qweight if hasattr(linear, "qweight") else linear.weight
    return getattr(linear, "compute_dtype", held.dtype), held.device


def _kernel_for(module: torch.nn.Module) -> Callable | None:
    """The kernels' forward a module of this shape would take: a norm (a 1-D weight and an epsilon) or a
    dense MLP (gate, up and down projections and an activation); None for any other module."""
    weight = getattr(module, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 1 and isinstance(_epsilon(module), float):
        return _fused_norm
    if all(hasattr(module, name) for name in ("gate_proj", "up_proj", "down_proj", "act_fn")):
        return _fused_mlp
    return None


def _probe(module: torch.nn.Module, kernels: Any) -> Callable | None:
    """``module``'s forward through the kernels (``_kernel_for``) where, on a random input, it agrees with
    its class's own (a norm that scales by ``1 + weight``, a LayerNorm or an MLP whose activation is not SiLU
    does not; nor a class whose forward takes more than the input), else None. An error of the kernels is
    raised."""
    forward = _kernel_for(module)
    if forward is _fused_norm:
        width, dtype, device = module.weight.shape[-1], module.weight.dtype, module.weight.device
    else:
        width, (dtype, device) = module.gate_proj.in_features, _compute_dtype_device(module.gate_proj)
    generator = torch.Generator(device).manual_seed(0)
    x = torch.randn(3, width, generator=generator, device=device).to(dtype)
    with torch.inference_mode():
        try:
            own = type(module).forward(module, x).float()
        except (TypeError, ValueError, RuntimeError, AttributeError):  # not a forward of the input alone
            return None
        made = forward(module, x, kernels).float()
    tolerance = 2**-6 * float(own.abs().max()) + 1e-6  # a few bf16 roundings; a wrong formula is far off
    return (
        (lambda self, x: forward(self, x, kernels)) if float((made - own).abs().max()) <= tolerance else None
    )


def _epsilon(module: Any) -> Any:
    """A norm's epsilon, under either name transformers' norms give it."""
    return getattr(module, "variance_epsilon", getattr(module, "eps", None))


def _fused_norm(module: Any, x: torch.Tensor, kernels: Any) -> torch.Tensor:
    return kernels.rms_norm(x, module.weight, _epsilon(module))


def _fused_mlp(module: Any, x: torch.Tensor, kernels: Any) -> torch.Tensor:
    return module.down_proj(kernels.silu_mul(module.gate_proj(x), module.up_proj(x)))


def compile_failure(exc: BaseException) -> bool:
    """An error of the compiler (dynamo, inductor, triton), not of the model or of memory."""
    name = type(exc).__module__ + "." + type(exc).__name__
    return any(part in name for part in ("torch._dynamo", "torch._inductor", "triton")) or (
        "BackendCompilerFailed" in name
    )


# --------------------------------------------------------------------------- CUDA graphs


class Replay:
    """``step()`` (a function of fixed input buffers returning a tensor) captured once as a CUDA graph;
    calling it replays the graph and returns the same output buffer, overwritten.

    Captured on a stream of its own without ``torch.cuda.graph``'s preliminaries: it waits for the whole
    device and empties the allocator's cache before every capture, so the host could not capture a decode's
    step while its prefill still ran, and the next read's cache had to be mapped again. A capture runs
    nothing, so the work queued before it needs no waiting for; ``thread_local``: the runner's preparing
    thread extracts features and encodes clips on the GPU during the capture."""

    def __init__(self, step: Callable[[], torch.Tensor]):
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(_capture_stream()):
            self.graph.capture_begin(capture_error_mode="thread_local")
            try:
                self.out = step()
            except BaseException:
                _end_failed_capture(self.graph)
                raise
            self.graph.capture_end()

    def __call__(self) -> torch.Tensor:
        self.graph.replay()
        return self.out


_CAPTURE_STREAMS: dict[int, torch.cuda.Stream] = {}


def _capture_stream() -> torch.cuda.Stream:
    """The current device's stream that ``Replay`` captures on (one per device, as ``torch.cuda.graph``
    keeps)."""
    device = torch.cuda.current_device()
    if device not in _CAPTURE_STREAMS:
        _CAPTURE_STREAMS[device] = torch.cuda.Stream(device)
    return _CAPTURE_STREAMS[device]


def _end_failed_capture(graph: torch.cuda.CUDAGraph) -> None:
    """End a capture whose step raised, so its stream captures no more (its own error is the one raised;
    an invalidated capture refuses to end cleanly)."""
    with suppress(RuntimeError):
        graph.capture_end()


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
    """``run()``; where the compiler (or a fused kernel's) fails in it, that path turned off for the run (the
    decoder's modules uncompiled; ``run`` applies the fused kernels only while ``paths.fused``) and ``run()``
    again (it starts over: nothing of the failed attempt is kept)."""
    try:
        return run()
    except Exception as exc:
        if not ((paths.compile or paths.fused) and compile_failure(exc)):
            raise
        error = f"{type(exc).__name__}: {first_line(exc)}"
    if paths.compile:
        uncompile_decoder(decoder)
        paths.give_up("compile", f"torch.compile failed: {error}")
    else:
        paths.give_up("fused", f"a fused kernel failed: {error}")
    return run()
