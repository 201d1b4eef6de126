"""The audio codec prepared at load (``backends.hf.codec``): the same codes, bit for bit, without a host
read."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402

from audioicl.backends.hf.codec import prepare_codecs  # noqa: E402

# lengths around the hop (600 samples at 24 kHz) and the strides' products, where the padding changes
LENGTHS = (1, 599, 600, 601, 4_801, 12_345)


@pytest.fixture(scope="module")
def codecs():
    """The released WavTokenizer encoder's configuration (weight-normalised convolutions) with random
    weights, as the model holds it (float32): ``(original, prepared, convolutions prepared)``."""
    original, prepared = _codec(), _codec()
    return original, prepared, prepare_codecs(prepared)


def _codec():
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    return AutoModel.from_config(AutoConfig.for_model("wavtokenizer_encoder")).float().eval()


def test_every_convolution_is_prepared_and_a_model_without_a_codec_is_left_alone(codecs):
    original, prepared, count = codecs
    convs = [m for m in original.modules() if type(m).__name__ == "WavTokenizerConv1d"]
    assert count == len(convs) > 0
    assert {m.padding_total.device.type for m in prepared.modules() if hasattr(m, "padding_total")} == {"cpu"}
    assert prepare_codecs(torch.nn.Sequential(torch.nn.Linear(2, 2))) == 0


@pytest.mark.parametrize("length", LENGTHS)
def test_a_clips_codes_and_embeddings_are_bit_for_bit_the_models_own(codecs, length):
    original, prepared, _ = codecs
    clip = torch.randn(1, 1, length, generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        assert torch.equal(prepared.encoder(clip), original.encoder(clip))
        assert torch.equal(prepared.encode(clip).audio_codes, original.encode(clip).audio_codes)


def test_encoding_a_clip_reads_nothing_back_from_the_device():
    """On the meta device (shapes, no values) every read of a device tensor to the host fails: the model's own
    code fails at its first padding, the prepared one encodes the clip, parameters and clip on that device."""
    original, prepared = _codec(), _codec()
    prepare_codecs(prepared)
    clip = torch.randn(1, 1, 4_801, device="meta")
    with torch.no_grad():
        with pytest.raises((RuntimeError, NotImplementedError)):
            original.to("meta").encode(clip)
        codes = prepared.to("meta").encode(clip).audio_codes
    assert codes.shape == (1, 1, 9)  # ceil(4,801 / 600)
