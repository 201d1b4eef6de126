"""The table a before-and-after benchmark prints: each way's median seconds over its passes, per unit of work, and
its ratio to the first way's (``codec_speed.py``, ``feature_order.py``)."""

from __future__ import annotations

import statistics


def print_medians(seconds: dict[str, list[float]], units: int, heading: str, unit: str = "a clip") -> None:
    """``seconds``: each way's seconds per pass over ``units`` units (``unit`` with its article, "a clip"
    unless named), the baseline first; ``heading``: the first column's title. Milliseconds a unit and the ratio
    to the baseline, as a markdown table."""
    base = statistics.median(next(iter(seconds.values())))
    first = next(iter(seconds))
    print(f"| {heading} | ms {unit} | vs {first} |")
    print("|---|---|---|")
    for label, runs in seconds.items():
        median = statistics.median(runs)
        print(f"| {label} | {1000 * median / units:.2f} | {base / median:.2f}x |")
