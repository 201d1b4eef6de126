"""The module inspect_ai's entry point loads (``[project.entry-points.inspect_ai] audioicl = ...``): importing
it registers the task ``audioicl/audioicl_bench`` (extra ``inspect``)."""

from .inspect_task import audioicl_bench, audioicl_rule, audioicl_system_prompt  # noqa: F401
