"""A hub id (``hf:Org/name``, ``vllm:Org/name``) that cannot be had: refused at once, before transformers or
vLLM spend half a minute retrying the hub for a name that is not in the local cache (a typo offline took 38 s).
Torch-free; needs ``huggingface_hub`` only where it is installed (the ``hf`` and ``vllm`` extras bring it)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from audioicl.errors import AudioICLError

HUB_PROBE_S = 3.0  # how long the one connection to the hub may take


def check_hub_id(name: str) -> None:
    """Refuse ``name`` when it is not in the local Hugging Face cache and the hub cannot be reached (or is
    switched off, ``HF_HUB_OFFLINE``), naming the cache and the endpoint; pass it on otherwise (the hub
    itself says whether such a repository exists)."""
    try:
        from huggingface_hub import constants, try_to_load_from_cache
        from huggingface_hub.errors import HFValidationError
    except ImportError:  # the kind's own import names the missing extra
        return
    try:
        cached = try_to_load_from_cache(name, "config.json")
    except HFValidationError as exc:
        raise AudioICLError(f"{name} is no folder here and no hub id ({exc})") from None
    if isinstance(cached, str):
        return
    where = f"not in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    if constants.HF_HUB_OFFLINE:
        raise AudioICLError(f"{name} is no folder here, {where}, and HF_HUB_OFFLINE is set; check the name")
    endpoint = urlsplit(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname or "", port), timeout=HUB_PROBE_S).close()
    except OSError as exc:
        raise AudioICLError(
            f"{name} is no folder here, {where}, and the hub at {constants.ENDPOINT} cannot be reached "
            f"({exc.strerror or type(exc).__name__}); check the name, or download the checkpoint where the "
            "hub is reachable and give its folder"
        ) from None
