"""Integrations with other evaluation tools: inspect_ai, lmms-eval and Hugging Face ``datasets``."""
