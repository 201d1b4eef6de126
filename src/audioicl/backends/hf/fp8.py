"""The FP8 condition (``-o precision=fp8``): every linear layer of the language model's decoder layers as a
rowwise FP8 matmul, the audio encoder, the embeddings and the output head left in the weights' dtype.

Each weight is quantized once at load to e4m3 with a scale per output row (its largest magnitude over 448,
e4m3's largest value); each input is quantized per token the same way when the layer runs; the product of the
two e4m3 matrices is accumulated in fp32, scaled back by both scales and given the layer's bias before it is
rounded to the layer's dtype (``torch._scaled_mm``, what the H100's FP8 tensor cores run, the bias in its
epilogue rather than a kernel of its own over the output). It computes other numbers than the checkpoint's: its
results are their own condition (``<model>+fp8``, ``Option.conditions``), never pooled with a native run's.

Where ``torch._scaled_mm`` does not run on the device (a GPU without FP8, a torch without it) the same
quantized numbers are multiplied in fp32 instead (``dequantized``): said once and recorded, as slow as it
sounds.

An input is quantized once for the layers that read it (``InputQuantizer``: q, k and v read one, gate and up
another), on a GPU in one Triton kernel (``reuse.kernels.rowwise_e4m3``; without Triton, five eager kernels:
recorded as ``fp8_quantize``).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from audioicl.errors import AudioICLError

from .reuse.graphs import first_line, text_model
from .reuse.parts import PARTS

log = logging.getLogger("audioicl.backends")
E4M3 = torch.float8_e4m3fn
E4M3_LARGEST = float(torch.finfo(E4M3).max)  # 448
SMALLEST_SCALE = 1e-12  # an all-zero row's scale (its quantized values are zeros whatever the scale)


def rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [rows, width] as e4m3 with a float32 scale per row ([rows, 1]): ``x ≈ quantized * scale``."""
    largest = x.abs().amax(dim=-1, keepdim=True).float()
    scale = (largest / E4M3_LARGEST).clamp(min=SMALLEST_SCALE)
    return (x.float() / scale).clamp(-E4M3_LARGEST, E4M3_LARGEST).to(E4M3), scale


Quantize = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class InputQuantizer:
    """Per-token e4m3 of layer inputs (``quantize``: ``rowwise`` or its kernel), the last input's kept while
    that tensor lives, so the layers reading one input (q, k, v) quantize it once."""

    def __init__(self, quantize: Quantize):
        self.quantize = quantize
        self._input: weakref.ref | None = None
        self._made: tuple[torch.Tensor, torch.Tensor] | None = None

    def __call__(self, x: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._input is not None and self._input() is x:
            assert self._made is not None
            return self._made
        made = self.quantize(x.reshape(-1, width))
        self._input, self._made = weakref.ref(x, self._forget), made
        return made

    def _forget(self, gone: weakref.ref) -> None:
        """The input is freed: its quantized copy goes too (it would hold an activation's memory)."""
        if self._input is gone:
            self._input = self._made = None


class RowwiseFP8Linear(torch.nn.Module):
    """``linear`` (an ``nn.Linear``) with its weight in e4m3 and a scale per output row; ``forward`` quantizes
    its input per token (``inputs``, shared by the layers of a model) and returns ``linear``'s dtype.
    ``scaled_mm``: through ``torch._scaled_mm``, else the same quantized numbers multiplied in fp32."""

    def __init__(self, linear: torch.nn.Linear, scaled_mm: bool, inputs: InputQuantizer | None = None):
        super().__init__()
        self.inputs = inputs or InputQuantizer(rowwise)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.compute_dtype = linear.weight.dtype
        weight, scale = rowwise(linear.weight.detach())
        self.register_buffer(
            "qweight", weight
        )  # [out, in], row-major: its transpose is what _scaled_mm takes
        self.register_buffer("weight_scale", scale.reshape(1, -1))  # [1, out]
        self.bias = linear.bias
        self.scaled_mm = scaled_mm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        quantized, scale = self.inputs(x, self.in_features)
        if self.scaled_mm:  # the bias added in fp32 before the product is rounded (the kernel's epilogue)
            out = torch._scaled_mm(
                quantized,
                self.qweight.t(),
                scale_a=scale,
                scale_b=self.weight_scale,
                bias=self.bias,
                out_dtype=self.compute_dtype,
            )
        else:  # the same numbers: the bias added before the rounding to the layer's dtype
            weight = self.qweight.float() * self.weight_scale.t()
            out = (quantized.float() * scale) @ weight.t()
            if self.bias is not None:
                out = out + self.bias.float()
            out = out.to(self.compute_dtype)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        kernel = "scaled_mm" if self.scaled_mm else "dequantized"
        return f"in_features={self.in_features}, out_features={self.out_features}, {kernel}"


@dataclass(frozen=True)
class Quantized:
    """What ``quantize_decoder`` did, for the run record: the layers replaced, the matmul (``scaled_mm`` or
    ``dequantized``) and, where it fell back, why; the inputs' quantization (``triton`` or ``torch``)."""

    layers: int
    kernel: str
    quantize: str
    fallback: str = ""

    def info(self) -> dict[str, Any]:
        made: dict[str, Any] = {
            "precision": "fp8",
            "fp8_layers": self.layers,
            "fp8_kernel": self.kernel,
            "fp8_quantize": self.quantize,
        }
        return {**made, "fp8_fallback": self.fallback} if self.fallback else made


def quantize_decoder(model: Any, family: Any, encoder: str, device: torch.device) -> Quantized:
    """Every ``nn.Linear`` of the decoder layers of ``model`` (a fast-path family's: ``reuse.parts.PARTS``
    finds its decoder) replaced by a ``RowwiseFP8Linear``, in place. A family without the fast path is refused:
    nothing here knows which of its modules are the language model's."""
    if family.name not in PARTS:
        raise AudioICLError(
            f"backend option precision=fp8: not available for {family.name} (it covers the decoders of "
            f"the families with the fast path: {', '.join(PARTS)})"
        )
    layers = text_model(PARTS[family.name](model, encoder).decoder).layers
    found = [
        (parent, name, child)
        for parent in layers.modules()
        for name, child in parent.named_children()
        if type(child) is torch.nn.Linear
    ]
    if not found:
        raise AudioICLError(
            f"backend option precision=fp8: {family.name}'s decoder layers have no linear layer"
        )
    fallback = _scaled_mm_refused(device, found[0][2].weight.dtype)
    if fallback:
        log.warning("hf backend: precision=fp8 multiplies in fp32 (torch._scaled_mm refused: %s)", fallback)
    quantize, quantized_by = _input_quantization(device)
    inputs = InputQuantizer(quantize)
    for parent, name, child in found:
        setattr(parent, name, RowwiseFP8Linear(child, scaled_mm=not fallback, inputs=inputs))
    return Quantized(len(found), "dequantized" if fallback else "scaled_mm", quantized_by, fallback)


def _input_quantization(device: torch.device) -> tuple[Quantize, str]:
    """The inputs' quantization on ``device``: the Triton kernel on a GPU where Triton imports, else
    ``rowwise``; and its name for the record."""
    if device.type != "cuda":
        return rowwise, "torch"
    try:
        from .reuse.kernels import rowwise_e4m3
    except ImportError:
        return rowwise, "torch"
    return rowwise_e4m3, "triton"


def _scaled_mm_refused(device: torch.device, dtype: torch.dtype) -> str:
    """Why ``torch._scaled_mm`` cannot run a rowwise product into ``dtype`` on ``device`` ("" where it can):
    tried on a small one."""
    a = torch.ones(16, 32, device=device).to(E4M3)
    b = torch.ones(48, 32, device=device).to(E4M3)
    try:
        torch._scaled_mm(
            a,
            b.t(),
            scale_a=torch.ones(16, 1, device=device),
            scale_b=torch.ones(1, 48, device=device),
            bias=torch.ones(48, device=device, dtype=dtype),  # q, k and v have one (Qwen2)
            out_dtype=dtype,
        )
    except (RuntimeError, AttributeError, TypeError, NotImplementedError) as exc:
        return f"{type(exc).__name__}: {first_line(exc)}"
    return ""
