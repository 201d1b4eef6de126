"""audioicl: build, run and score AudioICL-Bench (in-context learning in audio-language models)."""

__version__ = "0.1.0"
