"""Phi-4-multimodal (``Phi4MultimodalForCausalLM``, the transformers-native port): 12.5 audio tokens a second.

From transformers 5.25: the processor's audio feature extractor is its ``audio_processor`` attribute (not
``feature_extractor``; its ``sampling_rate`` is 16,000). ``Phi4MultimodalFeatureExtractor.__call__`` pads the
call's clips to the longest (``padding="longest"``, no truncation) and ``_compute_audio_embed_size`` gives a
clip ceil(frames / 8) ``audio_token`` (``<|endoftext11|>``) tokens, 10 ms frames: 12.5 a second. The encoder
(``Phi4MultimodalAudioModel.forward``) unfolds a long clip into 500-frame (40 s) chunks, so no length is cut;
the bound is the 128k-token context.

Not batch independent: the feature extractor's features of a clip are the same whatever its batch mates
(``_torch_extract_fbank_features`` masks the frames past each clip's end), but the encoder's convolutions
(``Phi4MultimodalAudioNemoConvSubsampling`` and each conformer layer's depthwise convolution) read the padded
frames past a clip's end, so its audio embeddings change with the longest clip of the call (measured on the
tiny checkpoint: up to 0.38 on a 1.3 s clip padded to 3 s). Each prompt is therefore its own processor call,
as the model card runs it (its clips still padded to that prompt's longest, as there).

Its ``generate`` passes the audio features at every step (``prepare_inputs_for_generation`` keeps them) and
``Phi4MultimodalAudioEmbedding.forward`` splices them wherever the input holds ``audio_token``: a step whose
new token is the audio token fails the call ("value tensor of shape [250, 64] cannot be broadcast to indexing
result of shape [1, 64]"), as the tiny checkpoint's random weights do. The token is suppressed in generation.
"""

from .base import AudioFamily
from .registry import register

FAMILY = register(
    AudioFamily(
        name="phi4-multimodal",
        display="Phi-4-multimodal",
        model_types=("phi4_multimodal",),
        model_class="Phi4MultimodalForCausalLM",
        audio_tokens_per_second=12.5,
        suppress_audio_token=True,  # its forward splices the features at every step (module docstring)
        prompts_per_call=1,  # a clip's encoder output depends on the call's longest clip (module docstring)
        adapter="speech-lora",  # the model card's load_adapter(..., subfolder="speech-lora")
        min_transformers="4.51",
        checkpoints=("microsoft/Phi-4-multimodal-instruct",),
        verified="gpu",
        notes=(
            "The transformers-native port (model_type phi4_multimodal; the hub's remote-code Phi4MMForCausalLM, "
            "with numbered <|audio_1|> placeholders, is another model type). Its model card loads the speech "
            "LoRA before audio use (model.load_adapter(path, adapter_name='speech', adapter_kwargs="
            "{'subfolder': 'speech-lora'}); needs peft): without it the base model answers audio prompts "
            "without its speech training. A prompt's clips are padded to its longest, and the encoder reads that "
            "padding, so prompts are processed one by one. In transformers 5.25 the processor loses its chat "
            "template on load (Phi4MultimodalProcessor.__init__ names no chat_template); the tokenizer keeps "
            "the same one. The processor's audio feature extractor is processor.audio_processor. Its generate "
            "splices the clips' features wherever the audio token is, at every step, so a generated audio token "
            "would fail the call: audioicl suppresses it (recorded as suppressed_tokens). vLLM serves the "
            "hub's remote-code layout (family phi4mm), not this one."
        ),
    )
)
