"""Inference backends: the protocol and registry (``base``), the built-in solvers, and (loaded on demand by
``load_backend``) the model backends, one module per backend kind."""

from . import builtin  # noqa: F401  (registers "builtin")
from .base import BACKENDS, Backend, ModelSpec, load_backend, register_backend

__all__ = ["BACKENDS", "Backend", "ModelSpec", "load_backend", "register_backend"]
