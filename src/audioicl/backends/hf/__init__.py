"""The ``hf`` kind: audio-language models through Hugging Face transformers (``--model hf:DIR_OR_ID``).

This module declares the kind and imports nothing heavy. The backend: ``load`` (a checkpoint's class, weights and
processor), ``features`` (each clip through the feature extractor once), ``backend`` (``HFBackend``: requests
to answers, transformers' ``generate`` where the fast path does not run), ``processed`` (a ``parts`` family's
own processor per micro-batch) and ``reuse/`` (the GPU fast path: rows that share a prefix, the family's
model parts, the decode, its attention, CUDA graphs and Triton kernels). Needs the ``hf`` extra.
"""

from ..kinds import FLAG, TEXT, Kind, Option, auto_or, choice, whole

SPEED = choice("auto", "on", "off")

KIND = Kind(
    name="hf",
    summary="Audio-language models through Hugging Face transformers, with a GPU fast path for the families "
    "that have one.",
    spec="hf:HUB_ID_OR_FOLDER",
    factory="audioicl.backends.hf.backend:make_hf",
    extra="hf",
    packages=("torch", "transformers"),
    checkpoint=True,
    gpu=True,
    options=(
        Option("seed", whole(0), 0, "the run's seed (--seed): sampling", hidden=True),
        Option(
            "dtype",
            choice("auto", "bf16", "fp16", "fp32"),
            "auto",
            "the weights' dtype",
            note="auto: bf16 on a GPU that has it, else fp32",
        ),
        Option("device", TEXT, "auto", "where the model runs (cuda:1, cpu ...)", note="auto: cuda, else cpu"),
        Option("attn", choice("sdpa", "flash_attention_2", "eager"), "sdpa", "the attention implementation"),
        Option("trust_remote_code", FLAG, False, "run the checkpoint's own code"),
        Option(
            "hub_kernels",
            choice("off", "on"),
            "off",
            "transformers' kernels fetched from the hub in place of the model's layers (on: needs the network, "
            "other numerics than the checkpoint's code)",
        ),
        Option(
            "precision",
            choice("native", "fp8"),
            "native",
            "fp8: the language model's linear layers as rowwise FP8 matmuls (e4m3; a scale per weight row and "
            "per token; fp32 accumulation, the bias added before the one rounding to the weights' dtype), the "
            "audio encoder and the output head in the weights' dtype; other numbers than the checkpoint's, so its "
            "results are the condition <model>+fp8",
            note="native: every layer in the weights' dtype",
            conditions={"fp8": "fp8"},
        ),
        Option(
            "cache",
            choice("dynamic", "static"),
            "dynamic",
            "transformers' KV cache for reuse=off (static preallocates)",
            keeps_answers=True,
        ),
        Option(
            "reuse",
            choice("off", "audio", "prefix"),
            None,
            "the fast path: prefix encodes each clip once and computes the prefix an episode's prompts share "
            "once; audio only the first; off runs transformers' generate on every prompt",
            keeps_answers=True,
            note="prefix where the family has the fast path, else off",
        ),
        Option(
            "encoder",
            choice("valid", "window"),
            "valid",
            "the fast path's Qwen2-Audio encoder over each clip's valid frames or the whole 30 s window",
            keeps_answers=True,
        ),
        Option(
            "compile",
            SPEED,
            "auto",
            "the fast path's decoder norms and MLPs through torch.compile",
            keeps_answers=True,
            note="auto: off",
        ),
        Option(
            "fused",
            SPEED,
            "auto",
            "the fast path's decoder norms and MLPs through Triton kernels",
            keeps_answers=True,
            note="auto: on a CUDA device",
        ),
        Option(
            "cuda_graphs",
            SPEED,
            "auto",
            "the fast path's decode step as a CUDA graph",
            keeps_answers=True,
            note="auto: on a CUDA device",
        ),
        Option(
            "pack",
            choice("on", "off"),
            "off",
            "the fast path packs a batch's rows into fewer rows (no padding between them)",
            keeps_answers=True,
        ),
        Option(
            "allocator",
            choice("auto", "expandable", "default"),
            "auto",
            "the CUDA caching allocator's segments",
            keeps_answers=True,
            note="auto: expandable on a CUDA device unless PYTORCH_CUDA_ALLOC_CONF is set",
        ),
        Option(
            "decode_batches",
            auto_or(whole(1)),
            "auto",
            "batches of the fast path decoded together",
            keeps_answers=True,
            note="auto: up to 4 on a GPU within a quarter of its free memory, 1 on the CPU",
        ),
        Option(
            "encode_ahead",
            SPEED,
            "auto",
            "the next window's clips encoded while this one is answered",
            keeps_answers=True,
            note="auto: on a CUDA device",
        ),
    ),
)
