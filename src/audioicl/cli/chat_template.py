"""``audioicl chat-template``: the chat template to serve a checkpoint with, for the ``openai`` backend."""

from __future__ import annotations

from pathlib import Path

from audioicl.backends.base import ModelSpec, check_checkpoint, check_hub_checkpoint
from audioicl.errors import AudioICLError
from audioicl.files import write_atomic

from .options import command


def _add(sub):
    p = sub.add_parser(
        "chat-template",
        help="print the chat template that makes a served checkpoint render prompts as the offline backends",
        description=(
            "Print (or write to --out) the checkpoint's chat template, wrapped so that an OpenAI-compatible "
            "server renders each request of the openai: backend exactly as the hf: and vllm: backends render "
            "the same chat: text parts as they are, each audio part as the model's placeholder, in order. "
            "Serve with it: vllm serve DIR --chat-template FILE --chat-template-content-format openai. "
            "Needs transformers (the hf extra, or vLLM's environment)."
        ),
    )
    p.add_argument("checkpoint", help="checkpoint folder (or hub id) of an audio chat model")
    p.add_argument("--out", type=Path, help="write the template to this file instead of printing it")
    return p


@command(_add)
def chat_template_command(args) -> int:
    try:
        import transformers
    except ModuleNotFoundError as exc:
        raise AudioICLError("chat-template needs transformers: pip install 'audioicl[hf]'") from exc
    from audioicl.backends.families import family_of
    from audioicl.backends.rendering import generic_family, load_processor, served_chat_template

    # a missing folder, an unreachable hub: one line, at once
    check_checkpoint(ModelSpec("hf", args.checkpoint))
    check_hub_checkpoint(ModelSpec("hf", args.checkpoint))
    processor = load_processor(args.checkpoint)
    template = getattr(processor, "chat_template", None)
    if not isinstance(template, str):
        raise AudioICLError(f"{args.checkpoint}: its processor has no chat template")
    model_type = transformers.AutoConfig.from_pretrained(args.checkpoint).model_type
    family = family_of(model_type) or generic_family(model_type, processor)
    text = served_chat_template(template, family)
    if args.out is None:
        print(text)
    else:
        write_atomic(args.out, text)
        print(f"wrote {args.out}")
    return 0
