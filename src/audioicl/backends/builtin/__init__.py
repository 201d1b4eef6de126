"""The ``builtin`` kind: the built-in solvers (``audioicl.solvers``) served as a backend, no model.

``builtin:random`` and ``builtin:majority`` (floors), ``builtin:text-only``, ``builtin:oracle`` and
``builtin:icl`` (perceiving). The factory lives in ``backend``."""

from ..kinds import Kind, Option, number, whole

KIND = Kind(
    name="builtin",
    summary="The built-in solvers: answers without any model (floors, a text-only reader, a perceiving solver).",
    spec="builtin:SOLVER",
    factory="audioicl.backends.builtin.backend:make_builtin",
    options=(
        Option("seed", whole(0), 0, "the run's seed (--seed)", hidden=True),
        Option(
            "max_clip_seconds",
            number(0, above=True),
            None,
            "refuse longer clips, as a real model's encoder would",
            note="none: any length",
        ),
    ),
)
