"""Out of GPU memory: a micro-batch halved and retried, down to one prompt, and any batch as large halved
from then on without being tried, unless one as large ran before and this is the first such failure
(``Halving``); or one attempt that says whether it ran out (``Halving.once``: the reuse path's joined decodes,
which fall back to their reads). A threshold learned from one failure decides every later batch: what it learns
is tested over a whole benchmark's batches on the CPU (``tests/backends/hf/test_decode_plan.py``)."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..base import Response

log = logging.getLogger("audioicl.backends")


def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


class Halving:
    """Runs attempts on a device, halving what runs out of memory; ``seconds["lost"]`` and
    ``work["out_of_memory"]`` (the backend's counters) count what the failed attempts cost."""

    def __init__(self, device: torch.device, seconds: dict[str, float], work: dict[str, int]):
        self.device, self.seconds, self.work = device, seconds, work
        self._failed_footprints: dict[Callable, int] = {}  # the smallest that ran out of memory, by measure
        self._fitted: dict[Callable, int] = {}  # the largest that ran, by measure
        self._doubted: set[Callable] = set()  # measures whose one failure at a size that ran was not learned
        self.last_error = ""  # the last out-of-memory error's message

    def __call__(
        self, batch: Sequence[Any], attempt: Callable, prompts: Callable, footprint: Callable = len
    ) -> dict[int, Response]:
        """``attempt(batch)``; out of memory halves the batch (down to one item, whose ``prompts(item)``
        then get error responses). A batch whose ``footprint`` (prompts, or the reuse path's positions) is
        at least that of one that ran out of memory before is halved without being tried (counted:
        ``work["halved_untried"]``; a threshold learned from one failure that halves every later batch
        doubles the calls, and only this count shows it). The first failure at a size no larger than one that
        ran (memory held a moment elsewhere) halves that batch only: a second such failure is learned."""
        size, failed = footprint(batch), self._failed_footprints.get(footprint)
        if len(batch) > 1 and failed is not None and size >= failed:
            self.work["halved_untried"] = self.work.get("halved_untried", 0) + 1
        else:
            count = sum(len(prompts(item)) for item in batch)
            what = f"{count} prompts ({footprint.__name__.strip('_')} {size})"
            doubted = size <= self._fitted.get(footprint, -1) and footprint not in self._doubted
            then = (
                "halving it (a batch as large ran before: later ones are tried)"
                if doubted
                else "halving it, and any batch as large from now on"
            )
            answered = self.once(batch, attempt, what, then)
            if answered is not None:
                self._fitted[footprint] = max(size, self._fitted.get(footprint, 0))
                return answered
            if doubted:
                self._doubted.add(footprint)
            else:
                self._failed_footprints[footprint] = min(size, failed or size)
            if len(batch) == 1:
                error = f"out of memory on the smallest batch ({self.device}): {self.last_error}"
                return {index: Response.failed(error) for index in prompts(batch[0])}
        half = len(batch) // 2
        return {
            **self(batch[:half], attempt, prompts, footprint),
            **self(batch[half:], attempt, prompts, footprint),
        }

    def once(
        self, batch: Sequence[Any], attempt: Callable, what: str, then: str
    ) -> dict[int, Response] | None:
        """``attempt(batch)``, or None where it ran out of memory: the failed attempt counted (its seconds
        ``seconds["lost"]``, ``work["out_of_memory"]``), the device's cache emptied and a warning naming
        ``what`` ran out, the memory held, and what is done ``then``; nothing learned (``__call__`` learns).

        The caller's retry happens after the ``except`` block: inside it, the exception's traceback still holds
        the failed attempt's activations, and the retry would run out of memory too."""
        started = time.perf_counter()
        try:
            return attempt(batch)
        except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
            if not is_out_of_memory(exc):
                raise
            self.last_error = str(exc)
            held, said = self.memory_held(), str(exc).split(". Of the allocated")[0][:240]
        self.free_cache()
        self.seconds["lost"] += time.perf_counter() - started
        self.work["out_of_memory"] += 1
        log.warning(
            "hf backend: out of memory on %s; GiB in use when it failed %s, after %s (%s); %s",
            what,
            held,
            self.memory_held(),
            said,
            then,
        )
        return None

    def memory_held(self) -> str:
        """What this process holds on the device, in GiB: tensors' and the caching allocator's."""
        if self.device.type != "cuda":
            return "-"
        gib = 2**30
        tensors, reserved = torch.cuda.memory_allocated(self.device), torch.cuda.memory_reserved(self.device)
        return f"{tensors / gib:.1f} (reserved {reserved / gib:.1f})"

    def free_cache(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
