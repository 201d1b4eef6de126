"""The Triton kernels of ``-o fused=`` (``backends.kernels``) against the transformers modules they stand in for:
on a GPU where there is one, else through Triton's interpreter on the CPU (tests/conftest.py chooses it)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("transformers")

from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm, apply_rotary_pos_emb  # noqa: E402

from audioicl.backends.hf.reuse.kernels import rms_norm, rotary, silu_mul  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def norm_of(width: int, dtype: torch.dtype) -> Qwen2RMSNorm:
    norm = Qwen2RMSNorm(width, eps=1e-6).to(DEVICE, dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(width, generator=torch.Generator().manual_seed(width)))
    return norm


# widths: a thin per-head norm (several rows a program), one not a power of two, a Qwen2.5-Omni hidden size
@pytest.mark.parametrize(("width", "rows"), [(48, 37), (100, 1), (128, 70), (3584, 5)])
def test_rms_norm_is_transformers_rmsnorm_in_fp32(width, rows):
    norm = norm_of(width, torch.float32)
    x = torch.randn(rows, 3, width, device=DEVICE) * 4
    made = rms_norm(x, norm.weight, norm.variance_epsilon)
    assert made.shape == x.shape and made.dtype == torch.float32
    torch.testing.assert_close(made, norm(x), rtol=1e-5, atol=1e-5)


def test_rms_norm_reads_a_strided_input_and_keeps_the_promoted_dtype():
    norm = norm_of(64, torch.float32)
    x = torch.randn(64, 10, device=DEVICE).t()  # rows 10 apart: not contiguous
    torch.testing.assert_close(rms_norm(x, norm.weight, 1e-6), norm(x), rtol=1e-5, atol=1e-5)
    half = x.to(torch.bfloat16)  # fp32 weight times a bf16 input: fp32, as transformers' product gives it
    assert rms_norm(half, norm.weight, 1e-6).dtype == norm(half).dtype == torch.float32


def test_no_positions_give_an_empty_output():
    norm = norm_of(64, torch.float32)
    assert rms_norm(torch.zeros(2, 0, 64, device=DEVICE), norm.weight, 1e-6).shape == (2, 0, 64)
    assert silu_mul(torch.zeros(0, 8, device=DEVICE), torch.zeros(0, 8, device=DEVICE)).shape == (0, 8)


def test_silu_mul_is_silu_of_gate_times_up_in_fp32():
    gate, up = torch.randn(2, 5, 333, device=DEVICE) * 6, torch.randn(2, 5, 333, device=DEVICE)
    made = silu_mul(gate, up)
    assert made.shape == up.shape
    torch.testing.assert_close(made, torch.nn.functional.silu(gate) * up, rtol=1e-5, atol=1e-6)


def projected(rows: int, positions: int, heads: int, dim: int, dtype: torch.dtype) -> torch.Tensor:
    """Queries or keys as the attention makes them: [rows, positions, heads, dim] transposed to heads first."""
    return (torch.randn(rows, positions, heads, dim, device=DEVICE) * 3).to(dtype).transpose(1, 2)


# head dims: Qwen's 128, one whose half is not a power of two; cos/sin per row or one for every row; a program
# of one position (compiled, ROTARY_POSITIONS), of 4 (7 positions: a row's last program half outside it), of 64
@pytest.mark.parametrize("positions", [1, 4, 64])
@pytest.mark.parametrize(("dim", "cos_rows"), [(128, 3), (96, 3), (64, 1)])
def test_rotary_is_transformers_rotary_embedding_in_fp32_laid_out_as_eager(dim, cos_rows, positions):
    queries, keys = projected(3, 7, 5, dim, torch.float32), projected(3, 7, 2, dim, torch.float32)
    cos, sin = (torch.randn(cos_rows, 7, dim, device=DEVICE) for _ in range(2))
    eager = apply_rotary_pos_emb(queries, keys, cos, sin)
    both = (rotary(queries, cos, sin, positions), rotary(keys, cos, sin, positions))
    for made, expected in zip(both, eager, strict=True):
        assert made.shape == expected.shape and made.stride() == expected.stride()
        torch.testing.assert_close(made, expected, rtol=0, atol=1e-6)
    empty = rotary(projected(2, 0, 5, dim, torch.float32), cos[:, :0], sin[:, :0], positions)
    assert empty.shape == (2, 5, 0, dim)


@pytest.mark.parametrize("per_program", [1, 64])
def test_rotary_in_bf16_is_the_eager_one_to_the_bit(per_program):
    """Each product and the sum rounded to bf16 where eager rounds them, in integer arithmetic (a compiler
    that drops float round trips, the interpreter's truncating casts): the same bits, on a GPU too."""
    positions = 300 if DEVICE.type == "cuda" else 20
    queries = projected(4, positions, 32, 128, torch.bfloat16)
    keys = projected(4, positions, 8, 128, torch.bfloat16)
    cos, sin = (torch.randn(4, positions, 128, device=DEVICE).to(torch.bfloat16) for _ in range(2))
    eager = apply_rotary_pos_emb(queries, keys, cos, sin)
    made = (rotary(queries, cos, sin, per_program), rotary(keys, cos, sin, per_program))
    assert torch.equal(made[0], eager[0]) and torch.equal(made[1], eager[1])


@pytest.mark.skipif(DEVICE.type != "cuda", reason="the interpreter does not round bf16 as a GPU does")
def test_in_bf16_on_a_gpu_nearly_every_element_is_the_eager_one_to_the_bit():
    norm = norm_of(3584, torch.bfloat16)
    x = torch.randn(4096, 3584, device=DEVICE, dtype=torch.bfloat16)
    assert (rms_norm(x, norm.weight, 1e-6) == norm(x)).float().mean() > 0.99
    gate, up = torch.randn_like(x), torch.randn_like(x)
    assert (silu_mul(gate, up) == torch.nn.functional.silu(gate) * up).float().mean() > 0.99


@pytest.mark.parametrize(("rows", "width"), [(1, 64), (37, 100), (5, 4096)])
def test_rowwise_e4m3_is_the_eager_quantization(rows, width):
    """The FP8 condition's per-token quantization in one kernel: the same e4m3 values and scales as
    ``fp8.rowwise`` (an all-zero row included)."""
    from audioicl.backends.hf.fp8 import rowwise
    from audioicl.backends.hf.reuse.kernels import rowwise_e4m3

    x = torch.randn(rows, width, device=DEVICE) * torch.logspace(-3, 3, rows, device=DEVICE)[:, None]
    x[0] = 0
    made, scale = rowwise_e4m3(x)
    expected, expected_scale = rowwise(x)
    assert made.dtype == torch.float8_e4m3fn and scale.shape == (rows, 1)
    torch.testing.assert_close(scale, expected_scale, rtol=0, atol=0)
    if DEVICE.type == "cuda":  # Triton's interpreter casts to e4m3 wrongly where rounding carries into the
        assert torch.equal(made.float(), expected.float())  # exponent (127.6 → 64): values checked on a GPU
