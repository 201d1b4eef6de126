"""Triton kernels for the decoder's elementwise work (``-o fused=``, ``graphs.fuse_decoder``): each one pass
over memory where transformers' eager code makes several.

- ``rms_norm``: transformers' RMSNorm (``weight * (x * rsqrt(mean(x²) + eps)).to(x.dtype)``, the mean in
  fp32). Eager, that is seven kernels (the fp32 copy, its square, the mean, the product, the cast back, the
  weight) reading and writing about 40 bytes an element in bf16; here 4.
- ``silu_mul``: a dense MLP's ``silu(gate) * up``; eager, two kernels and a temporary (10 bytes an element);
  here 6.
- ``rotary``: transformers' rotary embedding of queries or keys (``x * cos + rotate_half(x) * sin``); eager,
  five kernels over the head-transposed tensor (a negation, a concatenation, two products and a sum, the
  strided ones not vectorised) writing four temporaries; here one read and one write. It rounds each product
  and the sum to the input's dtype as eager does: the same bits in bf16.

Each rounds where the eager code rounds (the normalised value to the input's dtype before the weight; the
activation to the input's dtype before the product), so outputs differ from eager ones only where Triton's
``exp``/``rsqrt`` and the order of the mean's sum differ from PyTorch's in the last fp32 bits.

Triton specialises a kernel on its integer arguments (divisible by 16 or not): the widths and counts keep that
(without it the loads are not vectorised, and ``silu_mul`` ran slower than eager on an H200), the row count of
``rms_norm`` does not (``do_not_specialize``). Any variant a decode step needs is compiled by its first step,
which runs eagerly before the step is captured as a CUDA graph.
Where ``TRITON_INTERPRET=1`` is set before this module is imported, the kernels run on CPU tensors through
Triton's interpreter (the tests do: the same kernel code, executed with numpy).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

TILE = 4096  # elements a program of ``rms_norm`` reads (rows of a narrower width share a program)
SPAN = 2048  # elements a program of ``silu_mul`` reads


@triton.jit(do_not_specialize=["rows", "eps"])
def _rms_norm(x_ptr, w_ptr, out_ptr, rows, width, in_stride, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    col = tl.arange(0, BLOCK)[None, :]
    inside = (row < rows) & (col < width)
    x = tl.load(x_ptr + row * in_stride + col, mask=inside, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=1) / width
    normed = (x * tl.math.rsqrt(mean_square + eps)[:, None]).to(x_ptr.dtype.element_ty)
    weight = tl.load(w_ptr + col, mask=col < width, other=0.0).to(tl.float32)
    out = (weight * normed.to(tl.float32)).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + row * width + col, out, mask=inside)


@triton.jit
def _silu_mul(gate_ptr, up_ptr, out_ptr, count, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = at < count
    gate = tl.load(gate_ptr + at, mask=inside, other=0.0).to(tl.float32)
    up = tl.load(up_ptr + at, mask=inside, other=0.0)
    act = (gate / (1.0 + tl.exp(-gate))).to(up_ptr.dtype.element_ty)
    tl.store(out_ptr + at, (act.to(tl.float32) * up.to(tl.float32)).to(out_ptr.dtype.element_ty), mask=inside)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' RMSNorm of ``x`` over its last dimension (module docstring), in ``weight``'s and
    ``x``'s promoted dtype, as ``weight * normed`` gives it."""
    width = x.shape[-1]
    flat = x.reshape(-1, width)
    if flat.stride(-1) != 1:
        flat = flat.contiguous()
    out = torch.empty(flat.shape, dtype=torch.promote_types(weight.dtype, x.dtype), device=x.device)
    if flat.shape[0] == 0:  # nothing to launch (a grid of no programs is not a launch)
        return out.view(x.shape)
    block = triton.next_power_of_2(width)
    rows_per_program = max(1, TILE // block)
    grid = (triton.cdiv(flat.shape[0], rows_per_program),)
    warps = 8 if block * rows_per_program >= 4096 else 4
    _rms_norm[grid](
        flat, weight, out, flat.shape[0], width, flat.stride(0), eps,
        ROWS=rows_per_program, BLOCK=block, num_warps=warps,
    )  # fmt: skip
    return out.view(x.shape)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` (same shapes and dtype), as ``act_fn(gate_proj(x)) * up_proj(x)`` gives it."""
    gate, up = gate.contiguous(), up.contiguous()
    out = torch.empty_like(up)
    count = up.numel()
    if count == 0:
        return out
    _silu_mul[(triton.cdiv(count, SPAN),)](gate, up, out, count, BLOCK=SPAN, num_warps=8)
    return out


ROTARY_DTYPES = (torch.bfloat16, torch.float32)  # where ``rotary`` rounds as eager does
# positions a program of ``rotary`` takes: compiled, one (every head of it: 7-8x the eager kernels on an H100,
# ``benchmarks/fused_kernels.py``); Triton's interpreter (the tests) runs a program at a time in Python, ~1.3 ms
# each whatever its size, so there 64, the same kernel over fewer programs (a fused test took 6 minutes of CI)
ROTARY_POSITIONS = 64 if os.environ.get("TRITON_INTERPRET") == "1" else 1


@triton.jit(
    do_not_specialize=["length", "blocks", "x_batch", "x_head", "x_position", "c_batch", "c_position"]
)
def _rotary(
    x_ptr, cos_ptr, sin_ptr, out_ptr, length, blocks, heads, half, x_batch, x_head, x_position, c_batch, c_position,
    POSITIONS: tl.constexpr, HEADS: tl.constexpr, HALF: tl.constexpr, BF16: tl.constexpr,
):  # fmt: skip
    at = tl.program_id(0).to(tl.int64)  # ``POSITIONS`` positions of one row (``blocks`` a row): every head
    batch = at // blocks
    position = (at % blocks) * POSITIONS + tl.arange(0, POSITIONS)[:, None, None]
    head = tl.arange(0, HEADS)[None, :, None]
    dim = tl.arange(0, HALF)[None, None, :]
    along = (position < length) & (dim < half)
    inside = along & (head < heads)
    x = x_ptr + batch * x_batch + position * x_position + head * x_head
    x1 = tl.load(x + dim, mask=inside, other=0.0).to(tl.float32)
    x2 = tl.load(x + half + dim, mask=inside, other=0.0).to(tl.float32)
    c = batch * c_batch + position * c_position
    cos1 = tl.load(cos_ptr + c + dim, mask=along, other=0.0).to(tl.float32)
    cos2 = tl.load(cos_ptr + c + half + dim, mask=along, other=0.0).to(tl.float32)
    sin1 = tl.load(sin_ptr + c + dim, mask=along, other=0.0).to(tl.float32)
    sin2 = tl.load(sin_ptr + c + half + dim, mask=along, other=0.0).to(tl.float32)
    # eager: (x * cos) + (cat(-x2, x1) * sin), each product and the sum rounded to the dtype
    first = _rounded(_rounded(x1 * cos1, BF16) + _rounded(-x2 * sin1, BF16), BF16)
    second = _rounded(_rounded(x2 * cos2, BF16) + _rounded(x1 * sin2, BF16), BF16)
    out = out_ptr + ((batch * length + position) * heads + head) * (2 * half)
    dtype = out_ptr.dtype.element_ty
    tl.store(out + dim, first.to(dtype), mask=inside)
    tl.store(out + half + dim, second.to(dtype), mask=inside)


@triton.jit
def _rounded(x, BF16: tl.constexpr):
    """fp32 ``x`` rounded to the nearest bf16 (ties to even) and back, where ``BF16``; else ``x``. In
    integer arithmetic: the compiler dropped ``x.to(bfloat16).to(float32)`` round trips as no-ops (a
    quarter of the rotary's bf16 outputs differed from eager on an H100), and Triton's interpreter
    truncates."""
    if BF16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        x = bits.to(tl.float32, bitcast=True)
    return x


def rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions_per_program: int = ROTARY_POSITIONS
) -> torch.Tensor:
    """transformers' ``x * cos + rotate_half(x) * sin`` for ``x`` [rows, heads, positions, dim] (any strides
    with the last one 1, as the attention's transposed projections are) and ``cos``/``sin`` [rows or 1,
    positions, dim], in bf16 or fp32 (``ROTARY_DTYPES``); laid out as eager returns it for a transposed input
    ([rows, positions, heads, dim] in memory). ``positions_per_program``: a power of two."""
    if x.dtype not in ROTARY_DTYPES or cos.dtype != x.dtype or sin.dtype != x.dtype:
        raise TypeError(f"rotary takes {ROTARY_DTYPES}, one for all of its inputs")
    rows, heads, length, dim = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    cos, sin = cos.contiguous(), sin.contiguous()
    out = torch.empty((rows, length, heads, dim), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out.transpose(1, 2)
    broadcast = cos.shape[0] == 1
    blocks = triton.cdiv(length, positions_per_program)
    _rotary[(rows * blocks,)](
        x, cos, sin, out, length, blocks, heads, dim // 2, x.stride(0), x.stride(1), x.stride(2),
        0 if broadcast else cos.stride(0), cos.stride(1),
        POSITIONS=positions_per_program, HEADS=triton.next_power_of_2(heads), HALF=triton.next_power_of_2(dim // 2),
        BF16=x.dtype == torch.bfloat16, num_warps=4,
    )  # fmt: skip
    return out.transpose(1, 2)


E4M3_LARGEST = tl.constexpr(448.0)  # e4m3fn's largest value (``fp8.E4M3_LARGEST``)
SMALLEST_SCALE = tl.constexpr(1e-12)  # ``fp8.SMALLEST_SCALE``


@triton.jit(do_not_specialize=["rows"])
def _rowwise_e4m3(x_ptr, out_ptr, scale_ptr, rows, width, in_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    col = tl.arange(0, BLOCK)
    inside = col < width
    x = tl.load(x_ptr + row * in_stride + col, mask=inside, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0) / E4M3_LARGEST, SMALLEST_SCALE)
    quantized = tl.clamp(tl.math.div_rn(x, scale), -E4M3_LARGEST, E4M3_LARGEST)
    tl.store(out_ptr + row * width + col, quantized.to(out_ptr.dtype.element_ty), mask=inside)
    tl.store(scale_ptr + row, scale)


def rowwise_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fp8.rowwise`` in one pass over ``x`` [rows, width]: e4m3 and a float32 scale per row ([rows, 1]).
    The eager one reads and writes ``x`` five times (fp32 copy, magnitude, max, quotient, cast)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows, width = x.shape
    out = torch.empty((rows, width), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    if rows == 0:
        return out, scale
    block = triton.next_power_of_2(width)
    warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    _rowwise_e4m3[(rows,)](x, out, scale, rows, width, x.stride(0), BLOCK=block, num_warps=warps)
    return out, scale
