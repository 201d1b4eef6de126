"""The FP8 condition (``-o precision=fp8``, ``backends.hf.fp8``): rowwise quantization, the layer that
multiplies through ``torch._scaled_mm`` or, where that is refused, the same numbers in fp32, and which modules
of a loaded model it replaces."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from audioicl.backends.hf import KIND as HF  # noqa: E402
from audioicl.backends.hf.fp8 import (  # noqa: E402
    E4M3_LARGEST,
    InputQuantizer,
    RowwiseFP8Linear,
    quantize_decoder,
    rowwise,
)
from audioicl.errors import AudioICLError  # noqa: E402


def test_rowwise_scales_each_row_to_the_largest_e4m3_value():
    x = torch.tensor([[1.0, -4.0, 2.0], [0.0, 0.0, 0.0], [1e-3, 3e4, -1.0]])
    quantized, scale = rowwise(x)
    assert quantized.dtype == torch.float8_e4m3fn and scale.shape == (3, 1)
    assert quantized.float().abs().amax(dim=1).tolist() == [E4M3_LARGEST, 0.0, E4M3_LARGEST]
    assert torch.allclose(quantized.float() * scale, x, rtol=2**-3, atol=3e4 * 2**-4)
    assert not torch.isnan(scale).any() and (scale > 0).all()  # an all-zero row too


@pytest.mark.parametrize("bias", [True, False])
def test_the_fp8_layer_is_its_quantized_numbers_multiplied_exactly(bias):
    """``_scaled_mm`` (where it runs) and the fp32 fallback compute the same product of the same quantized
    numbers; both near the layer they replace (e4m3 keeps 3 mantissa bits)."""
    generator = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(64, 48, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(48, 64, generator=generator))
    x = torch.randn(2, 5, 64, generator=generator)
    linear.requires_grad_(False)
    fallback = RowwiseFP8Linear(linear, scaled_mm=False)
    made = fallback(x)
    assert made.shape == (2, 5, 48) and made.dtype == torch.float32
    quantized, scale = rowwise(x.reshape(-1, 64))
    weight, weight_scale = rowwise(linear.weight.detach())
    expected = (quantized.float() * scale) @ (weight.float() * weight_scale).t()
    expected = expected + (linear.bias if bias else 0)
    assert torch.equal(made.reshape(-1, 48), expected)
    exact = linear(x)
    assert float((made - exact).abs().max()) < 0.1 * float(exact.abs().max())
    fast = RowwiseFP8Linear(linear, scaled_mm=True)(x)  # torch's CPU build runs _scaled_mm too
    assert torch.allclose(fast, made, rtol=1e-5, atol=1e-4)


def test_the_bias_is_added_before_the_product_is_rounded_to_the_layers_dtype():
    """In bf16 the bias goes into ``_scaled_mm`` (its epilogue, no kernel of its own over the output): the fp32
    product plus the bias, rounded once; the fp32 fallback computes the same numbers bit for bit."""
    generator = torch.Generator().manual_seed(1)
    linear = torch.nn.Linear(256, 128).to(torch.bfloat16).requires_grad_(False)
    with torch.no_grad():
        linear.bias.copy_(torch.randn(128, generator=generator) * 30)  # large: rounding twice shows
    x = torch.randn(64, 256, generator=generator).to(torch.bfloat16)
    fast = RowwiseFP8Linear(linear, scaled_mm=True)(x)
    fallback = RowwiseFP8Linear(linear, scaled_mm=False)(x)
    quantized, scale = rowwise(x)
    weight, weight_scale = rowwise(linear.weight)
    product = (quantized.float() * scale) @ (weight.float() * weight_scale).t()
    rounded_once = (product + linear.bias.float()).to(torch.bfloat16)
    assert torch.equal(fast, rounded_once) and torch.equal(fallback, rounded_once)
    assert not torch.equal(product.to(torch.bfloat16) + linear.bias, rounded_once)  # the bias added after


def test_precision_fp8_is_a_condition_of_its_own_and_native_is_none():
    assert HF.conditions({"precision": "fp8"}) == ["fp8"]
    assert HF.conditions({"precision": "native"}) == [] and HF.conditions({}) == []
    assert HF.answer_options({"precision": "fp8"}) == {"precision": "fp8"}  # it changes the answers


def test_only_the_decoder_layers_linear_layers_are_replaced(tiny_checkpoints):
    from transformers import Qwen2AudioForConditionalGeneration

    from audioicl.backends.families import FAMILIES
    from audioicl.backends.hf.reuse.graphs import text_model
    from audioicl.backends.hf.reuse.parts import PARTS

    model = Qwen2AudioForConditionalGeneration.from_pretrained(
        tiny_checkpoints["qwen2-audio"], dtype="float32"
    )
    linear_before = {name for name, m in model.named_modules() if type(m) is torch.nn.Linear}
    done = quantize_decoder(model, FAMILIES.get("qwen2-audio"), "valid", torch.device("cpu"))
    replaced = {name for name, m in model.named_modules() if isinstance(m, RowwiseFP8Linear)}
    layers = text_model(PARTS["qwen2-audio"](model).decoder).layers
    assert not any(type(m) is torch.nn.Linear for m in layers.modules())  # every one replaced
    assert done.layers == len(replaced) == 7 * len(layers)  # q, k, v, o, gate, up, down
    assert done.info() == {
        "precision": "fp8",
        "fp8_layers": done.layers,
        "fp8_kernel": "scaled_mm",
        "fp8_quantize": "torch",  # the Triton kernel on a GPU
    }
    kept = linear_before - replaced
    assert any("audio_tower" in name for name in kept) and any("lm_head" in name for name in kept)
    assert any("multi_modal_projector" in name for name in kept)


def test_a_refused_scaled_mm_falls_back_to_fp32_said_once_and_recorded(tiny_checkpoints, monkeypatch, caplog):
    from transformers import Qwen2AudioForConditionalGeneration

    from audioicl.backends.families import FAMILIES

    def refused(*args, **kwargs):
        raise RuntimeError(
            "torch._scaled_mm is only supported on CUDA devices with compute capability >= 9.0"
        )

    monkeypatch.setattr(torch, "_scaled_mm", refused)
    model = Qwen2AudioForConditionalGeneration.from_pretrained(
        tiny_checkpoints["qwen2-audio"], dtype="float32"
    )
    with caplog.at_level(logging.WARNING, logger="audioicl.backends"):
        done = quantize_decoder(model, FAMILIES.get("qwen2-audio"), "valid", torch.device("cpu"))
    assert done.kernel == "dequantized" and "compute capability" in done.info()["fp8_fallback"]
    assert [r.getMessage() for r in caplog.records if "precision=fp8" in r.getMessage()] == [
        "hf backend: precision=fp8 multiplies in fp32 (torch._scaled_mm refused: RuntimeError: "
        "torch._scaled_mm is only supported on CUDA devices with compute capability >= 9.0)"
    ]
    with torch.no_grad():  # every replaced layer runs without _scaled_mm
        model.model.language_model(input_ids=torch.tensor([[1, 2, 3]]))


def test_a_family_without_the_fast_path_is_refused_naming_those_with_it():
    from audioicl.backends.families import FAMILIES

    with pytest.raises(AudioICLError, match=r"precision=fp8: not available for glmasr .*qwen2-audio"):
        quantize_decoder(object(), FAMILIES.get("glmasr"), "valid", torch.device("cpu"))


def test_an_input_is_quantized_once_for_the_layers_that_read_it_and_let_go_with_it():
    calls = []

    def counted(x):
        calls.append(x.shape)
        return rowwise(x)

    inputs = InputQuantizer(counted)
    layers = [RowwiseFP8Linear(torch.nn.Linear(32, 16), scaled_mm=False, inputs=inputs) for _ in range(3)]
    with torch.no_grad():
        x = torch.randn(4, 32)
        outs = [layer(x) for layer in layers]
        assert len(calls) == 1 and all(out.shape == (4, 16) for out in outs)
        y = x.clone()  # equal values, another tensor: quantized anew
        layers[0](y)
        assert len(calls) == 2
        del y  # the input freed: its quantized copy too
        assert inputs._made is None
