"""The reuse path's fast paths (``backends.graphs``): their options and what the run record says of them, the
decode step over fixed buffers and the compiled decoder modules giving the same tokens as transformers'
``generate``, and a capture or a compile that fails falling back once, with the same answers."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from helpers import share_features  # noqa: E402

from audioicl import AudioICLError, read_meta  # noqa: E402
from audioicl.backends.base import GenerationConfig, Request  # noqa: E402
from audioicl.backends.hf import KIND as HF  # noqa: E402
from audioicl.backends.hf.backend import HFBackend  # noqa: E402
from audioicl.backends.hf.reuse import graphs  # noqa: E402
from audioicl.backends.hf.reuse import path as hf_backend  # noqa: E402
from audioicl.backends.hf.reuse.graphs import (  # noqa: E402
    FastPaths,
    compile_decoder,
    compiled_modules,
    fuse_decoder,
    fused_modules,
    uncompile_decoder,
)
from audioicl.prompts.build import build_prompt  # noqa: E402
from audioicl.prompts.clips import ClipStore, load_morse_bank  # noqa: E402

CPU = torch.device("cpu")


def test_speed_options_are_checked_and_auto_is_off_on_the_cpu():
    settings = HF.parse({})
    assert (settings.compile, settings.fused, settings.cuda_graphs) == ("auto", "auto", "auto")
    with pytest.raises(AudioICLError, match="cuda_graphs must be auto, on or off"):
        HF.parse({"cuda_graphs": "yes"})
    with pytest.raises(AudioICLError, match="compile must be auto, on or off"):
        HF.parse({"compile": "max"})
    with pytest.raises(AudioICLError, match="fused must be auto, on or off"):
        HF.parse({"fused": "triton"})
    paths = FastPaths.resolve("auto", "auto", CPU, "auto")
    assert (paths.compile, paths.fused, paths.cuda_graphs, paths.why_not) == (False, False, False, {})
    on_a_gpu = FastPaths.resolve("auto", "auto", torch.device("cuda"), "auto")  # resolving touches no GPU
    assert on_a_gpu.cuda_graphs and on_a_gpu.fused
    compiled = FastPaths.resolve("on", "auto", torch.device("cuda"), "auto")  # compile takes the same modules
    assert compiled.compile and not compiled.fused and compiled.why_not == {}


def test_fused_kernels_asked_for_where_triton_cannot_run_fall_back_once_and_say_why(monkeypatch, caplog):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with caplog.at_level(logging.WARNING, logger="audioicl.backends"):
        paths = FastPaths.resolve("off", "auto", CPU, "on")
        both = FastPaths.resolve("on", "auto", torch.device("cuda"), "on")
    assert not paths.fused and paths.why_not == {
        "fused": "the fused kernels (Triton) need a CUDA device, this run is on cpu"
    }
    assert paths.info()["fused"] == {"asked": "on", "used": False, "fallback": paths.why_not["fused"]}
    assert both.compile and not both.fused and both.why_not == {"fused": "compile=on fuses the same modules"}
    assert sum("fused off" in r.getMessage() for r in caplog.records) == 2


def test_cuda_graphs_asked_for_on_the_cpu_fall_back_once_and_say_why(caplog):
    with caplog.at_level(logging.WARNING, logger="audioicl.backends"):
        paths = FastPaths.resolve("on", "on", CPU)
        paths.give_up("cuda_graphs", "again")  # already off: not said twice
    assert paths.compile and not paths.cuda_graphs
    assert "need a CUDA device" in paths.why_not["cuda_graphs"]
    assert [r.getMessage() for r in caplog.records if "cuda_graphs off" in r.getMessage()] == [
        "hf backend: cuda_graphs off, falling back to eager kernels: CUDA graphs need a CUDA device, "
        "this run is on cpu"
    ]
    assert paths.info() == {
        "compile": {"asked": "on", "used": True},
        "cuda_graphs": {"asked": "on", "used": False, "fallback": paths.why_not["cuda_graphs"]},
        "fused": {"asked": "off", "used": False},
    }


def requests_of(root: Path, family: str, tasks: tuple[str, ...]) -> list[Request]:
    """The k = 1..5 prompts of one episode of each of ``tasks``, an episode's together."""
    store, bank = ClipStore(root), load_morse_bank(root, "auto")
    work = [(ep.id, k, ep) for k in range(1, 6) for ep in read_meta(root / "meta" / f"meta_k{k}.jsonl")]
    return [
        Request(f"{eid}@k{k}", eid, ep.task, k, build_prompt(ep, store, family=family, bank=bank).chat)
        for eid, k, ep in sorted(work, key=lambda item: (item[0], item[1]))
        if ep.task in tasks
    ]


TASKS = ("AudioCount", "MorseCode", "AudioRemap")
CONFIG = GenerationConfig(max_new_tokens=6, batch_size=6)


def answers(backend: HFBackend, requests: list[Request]) -> list[tuple]:
    responses = backend.generate(requests, CONFIG)
    assert all(r.error is None for r in responses), [r.error for r in responses if r.error]
    return [(r.text, r.usage) for r in responses]


def other(backend: HFBackend, **options) -> HFBackend:
    """Another backend around the same model (and feature cache, where it can take it)."""
    made = backend.with_options(**options)
    share_features(backend, made)
    return made


@pytest.mark.parametrize("family", ["qwen2-audio", "qwen3-omni"])
def test_compiled_decoder_modules_give_the_tokens_of_plain_generate(tiny_backends, one_episode_each, family):
    backend = tiny_backends[family]
    requests = requests_of(one_episode_each, backend.family, TASKS)
    expected = answers(other(backend, reuse="off"), requests)
    decoder = backend.path.parts.decoder
    layers = len((decoder if hasattr(decoder, "layers") else decoder.language_model).layers)
    # dynamo traces the modules; its eager backend runs the traced graph (inductor needs a C compiler)
    dense = family == "qwen2-audio"  # Qwen3-Omni's MoE blocks stay eager
    assert compile_decoder(decoder, backend="eager") == layers * (3 if dense else 2) + 1
    try:
        assert all(module._compiled_call_impl is not None for module in compiled_modules(decoder))
        assert answers(backend, requests) == expected
    finally:
        uncompile_decoder(decoder)
    assert all(module._compiled_call_impl is None for module in compiled_modules(decoder))


@pytest.mark.parametrize("family", ["qwen2-audio", "qwen3-omni"])
def test_fused_decoder_modules_give_the_tokens_of_plain_generate(tiny_backends, one_episode_each, family):
    pytest.importorskip("triton")
    backend = tiny_backends[family]
    requests = requests_of(one_episode_each, backend.family, TASKS)
    expected = answers(other(backend, reuse="off"), requests)
    decoder = backend.path.parts.decoder
    layers = len((decoder if hasattr(decoder, "layers") else decoder.language_model).layers)
    fusion = fuse_decoder(decoder)
    fused = fusion.counts()
    assert fused.pop("apply_rotary_pos_emb") == layers  # every layer's rotary embedding
    if family == "qwen2-audio":  # every norm and dense MLP
        assert fused == {"Qwen2RMSNorm": 2 * layers + 1, "Qwen2MLP": layers}
    else:  # the norms, the per-head ones of queries and keys too; the MoE blocks stay eager
        assert sum(fused.values()) == 4 * layers + 1 and all("RMSNorm" in name for name in fused)
    (rotary,) = fusion.functions
    original = rotary.namespace.apply_rotary_pos_emb
    with fusion.applied():
        assert all("forward" in vars(module) for module, _ in fusion.forwards)
        assert rotary.namespace.apply_rotary_pos_emb is rotary.fused
        assert answers(backend, requests) == expected
    assert not any("forward" in vars(module) for module in fused_modules(decoder))  # only while applied
    assert rotary.namespace.apply_rotary_pos_emb is original


def test_the_probe_takes_only_the_modules_that_compute_what_the_kernels_do():
    pytest.importorskip("triton")
    from transformers import Qwen2Config
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
    from transformers.models.qwen2.modeling_qwen2 import Qwen2MLP, Qwen2RMSNorm

    config = Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)
    layer = torch.nn.Module()
    layer.input_layernorm = Qwen2RMSNorm(32)
    layer.post_attention_layernorm = GemmaRMSNorm(32)  # scales by 1 + weight: not the kernel's formula
    layer.mlp = Qwen2MLP(Qwen2Config(**{**config.to_dict(), "hidden_act": "gelu"}))  # not SiLU
    layer.self_attn = torch.nn.Module()

    class TakesMore(torch.nn.Module):  # a norm's shape whose forward needs more than the input
        def __init__(self):
            super().__init__()
            self.weight, self.eps = torch.nn.Parameter(torch.ones(32)), 1e-6

        def forward(self, x, scale):
            return x * scale

    layer.self_attn.q_norm = TakesMore()
    decoder = torch.nn.Module()
    decoder.layers, decoder.norm = torch.nn.ModuleList([layer]), Qwen2RMSNorm(32)
    fusion = fuse_decoder(decoder)
    assert fusion.counts() == {"Qwen2RMSNorm": 2}
    with fusion.applied():
        assert "forward" in vars(decoder.norm) and "forward" not in vars(layer.post_attention_layernorm)
    layer.mlp = Qwen2MLP(config)
    assert fuse_decoder(decoder).counts() == {"Qwen2RMSNorm": 2, "Qwen2MLP": 1}


def test_fused_kernels_that_cannot_run_leave_the_eager_modules_said_once(
    tiny_backends, one_episode_each, monkeypatch, caplog
):
    backend = tiny_backends["qwen2-audio"]
    requests = requests_of(one_episode_each, backend.family, ("AudioCount",))
    expected = answers(backend, requests)

    def no_triton(decoder):
        raise ImportError("No module named 'triton'\nmore")

    monkeypatch.setattr(hf_backend, "fuse_decoder", no_triton)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # as where Triton would run
    with caplog.at_level(logging.WARNING, logger="audioicl.backends"):
        made = other(backend, fused="on")
        assert answers(made, requests) == expected
    why = "the fused kernels cannot run: ImportError: No module named 'triton'"
    assert made.info["fused"] == {"asked": "on", "used": False, "fallback": why}
    assert sum("fused off" in r.getMessage() for r in caplog.records) == 1


def test_the_run_record_names_the_fast_paths_and_the_experts(tiny_backends):
    for family, backend in tiny_backends.items():
        assert backend.info["compile"] == {"asked": "auto", "used": False}
        assert backend.info["fused"] == {"asked": "auto", "used": False}  # auto: on a CUDA device
        assert backend.info["cuda_graphs"] == {"asked": "auto", "used": False}
        if family == "qwen3-omni":  # its MoE experts: transformers' implementation, as loaded
            assert backend.info["experts"] == backend.model.config.get_text_config()._experts_implementation
        else:
            assert "experts" not in backend.info


def test_a_capture_that_fails_falls_back_once_with_the_same_answers(
    tiny_backends, one_episode_each, monkeypatch, caplog
):
    backend = other(tiny_backends["qwen2-audio"])
    requests = requests_of(one_episode_each, backend.family, TASKS)
    expected = answers(backend, requests)
    captures = []

    def refuse(step):
        captures.append(step)
        raise RuntimeError("operation not permitted when stream is capturing\nmore")

    monkeypatch.setattr(graphs, "Replay", refuse)
    monkeypatch.setattr(graphs.torch.cuda, "synchronize", lambda: None)  # no CUDA device here
    backend.path.paths.cuda_graphs = True  # as on a GPU
    with caplog.at_level(logging.WARNING, logger="audioicl.backends"):
        assert answers(backend, requests) == expected
    assert len(captures) == 1  # tried once, then eager for every later batch
    assert backend.path.paths.why_not == {
        "cuda_graphs": "the decode step cannot be captured: operation not permitted when stream is capturing"
    }
    assert backend.info["cuda_graphs"]["fallback"] == backend.path.paths.why_not["cuda_graphs"]
    assert sum("cuda_graphs off" in r.getMessage() for r in caplog.records) == 1


def test_a_capture_that_runs_out_of_memory_is_an_out_of_memory_error(monkeypatch):
    def exhausted(step):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(graphs, "Replay", exhausted)
    paths = FastPaths(False, True, {"compile": "off", "cuda_graphs": "on"})
    with pytest.raises(torch.cuda.OutOfMemoryError):
        graphs.replayed(lambda: torch.zeros(1), paths)
    assert paths.cuda_graphs  # memory is the batch's problem (halved and retried), not the graph's


def test_a_compile_that_fails_falls_back_to_eager_with_the_same_answers(
    tiny_backends, one_episode_each, caplog
):
    backend = other(tiny_backends["qwen2-audio"])
    requests = requests_of(one_episode_each, backend.family, ("AudioCount",))
    expected = answers(backend, requests)

    def broken(graph, example_inputs):
        raise RuntimeError("no compiler here")

    compile_decoder(backend.path.parts.decoder, backend=broken)
    backend.path.paths.compile = True
    try:
        with caplog.at_level(logging.WARNING, logger="audioicl.backends"):
            assert answers(backend, requests) == expected
    finally:
        uncompile_decoder(backend.path.parts.decoder)
    assert not backend.path.paths.compile
    assert backend.path.paths.why_not["compile"].startswith("torch.compile failed: BackendCompilerFailed")
    assert backend.info["compile"]["fallback"] == backend.path.paths.why_not["compile"]
    assert all(module._compiled_call_impl is None for module in compiled_modules(backend.path.parts.decoder))


def test_the_rotary_embedding_is_fused_only_where_it_takes_queries_and_keys_as_transformers_usual_one():
    """Qwen2's ``apply_rotary_pos_emb(q, k, cos, sin)`` takes the kernel; Gemma 4's (one tensor at a time)
    and a function that computes something else do not."""
    pytest.importorskip("triton")
    from transformers.models.gemma4 import modeling_gemma4
    from transformers.models.qwen2 import modeling_qwen2

    from audioicl.backends.hf.reuse import kernels
    from audioicl.backends.hf.reuse.graphs import _rotary_agrees, _rotary_of

    attention = torch.nn.Module()
    attention.head_dim = 16
    attention.q_proj, attention.k_proj = torch.nn.Linear(32, 64), torch.nn.Linear(32, 32)
    usual = modeling_qwen2.apply_rotary_pos_emb
    assert _rotary_agrees(usual, _rotary_of(usual, kernels), attention)
    gemma = modeling_gemma4.apply_rotary_pos_emb
    assert not _rotary_agrees(gemma, _rotary_of(gemma, kernels), attention)

    def interleaved(q, k, cos, sin, unsqueeze_dim=1):  # pairs (0, 1), (2, 3) ...: not rotate_half's
        def turn(x):
            pairs = x.unflatten(-1, (-1, 2))
            return torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)

        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + turn(q) * sin, k * cos + turn(k) * sin

    assert not _rotary_agrees(interleaved, _rotary_of(interleaved, kernels), attention)

    # GLM-ASR's takes position ids fifth and rotates only the first cos.shape[-1] dims: such calls are its own
    from transformers.models.glmasr import modeling_glmasr

    older = modeling_glmasr.apply_rotary_pos_emb
    q, k = torch.randn(2, 4, 3, 16), torch.randn(2, 2, 3, 16)
    for cos, sin, more in (
        (torch.randn(2, 3, 16), torch.randn(2, 3, 16), (torch.arange(3)[None],)),  # position ids, positional
        (torch.randn(2, 3, 8), torch.randn(2, 3, 8), ()),  # partial rotary
    ):
        for made, expected in zip(
            _rotary_of(older, kernels)(q, k, cos, sin, *more), older(q, k, cos, sin, *more), strict=True
        ):
            assert torch.equal(made, expected)
