"""Step-Audio 2 mini (StepFun): an end-to-end audio-language model of the audio in-context-learning
literature's baselines, with a base checkpoint.

transformers runs it only as the checkpoint's remote code (``AutoModelForCausalLM``, ``trust_remote_code``;
no processor or chat template in transformers), and vLLM itself does not implement it; vLLM-Omni serves
``stepfun-ai/Step-Audio2-mini`` (``vllm serve ... --omni --trust-remote-code``, per vLLM-Omni's example) with an
OpenAI-compatible API, which audioicl's ``openai`` backend can ask.
"""

from .base import AudioFamily
from .registry import register

FAMILY = register(
    AudioFamily(
        name="step_audio2",
        display="Step-Audio 2 mini",
        model_types=(),  # remote code only: no model type transformers knows
        hf=False,
        min_transformers="-",
        verified="untested",
        served_by="openai (vLLM-Omni)",
        checkpoints=("stepfun-ai/Step-Audio-2-mini", "stepfun-ai/Step-Audio-2-mini-Base"),
        base_checkpoints=("stepfun-ai/Step-Audio-2-mini-Base",),
        notes=(
            "Instruct: a vLLM-Omni server of the checkpoint, then audioicl run --model openai:NAME --base-url "
            "http://HOST:PORT/v1 (the chat layouts). Base: by continuation only, which a chat completions "
            "server cannot take; its remote code through transformers is not a path audioicl runs (no "
            "processor: the hf backend needs one). Not run here: no vLLM-Omni, no GPU model, no network; untested."
        ),
    )
)
