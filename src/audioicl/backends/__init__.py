"""Inference backends: the protocol and the registry of kinds (``base``), the form a kind declares itself in
(``kinds``), what the model kinds share (``rendering``, ``families``), and one package per kind (``builtin``,
``hf``, ``openai``, ``vllm``), whose heavy modules load only when a backend of that kind is made."""

from .base import KINDS, Backend, ModelSpec, load_backend, register_kind

__all__ = ["KINDS", "Backend", "ModelSpec", "load_backend", "register_kind"]
