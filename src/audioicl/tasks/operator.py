"""AudioOperator (digit, sound, digit) and AudioOperatorHard (three digits, two sounds)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from audioicl.audio import SAMPLE_RATE
from audioicl.errors import AudioICLError
from audioicl.synth import dsp

from .base import TaskSpec, label_set, register
from .context import BuildOptions, GenContext, PlannedEpisode, PlannedFile, TaskGenerator, single_clip_episode
from .transcripts import spoken_text

DIGITS = range(1, 10)
OPERATORS = ("add", "sub", "mul")
CLIPS_PER_FILLER = 8  # made per filler (or filler pair); an episode uses max(k) + 1 of them
GAP_SECONDS = 0.025
FADE_MS = 3.0
FILLER_BANK_OFFSET = 200_000  # AudioOperator episode i: one-shot 200000 + i
HARD_FILLER_BANK_OFFSET = 300_000  # AudioOperatorHard episode i: one-shots 300000 + 2i and + 2i + 1, × drawn


def binary_values() -> set[int]:
    """Every answer a op b can take: + and ×, and − with a ≥ b."""
    values = set()
    for a, b in itertools.product(DIGITS, repeat=2):
        values |= {a + b, a * b}
        if a >= b:
            values.add(a - b)
    return values


def ternary_values() -> set[int]:
    """Every non-negative answer of three digits with one × and one + or −, × first or second."""
    values = set()
    for a, b, c in itertools.product(DIGITS, repeat=3):
        values |= {a * b + c, a + b * c}
        values |= {v for v in (a * b - c, a - b * c) if v >= 0}
    return values


def _apply(op: str, x: int, y: int) -> int:
    return {"add": x + y, "sub": x - y, "mul": x * y}[op]


@dataclass(frozen=True)
class Expression:
    digits: tuple[int, ...]
    ops: tuple[str, ...]  # one between each pair of digits

    @property
    def value(self) -> int:
        """Normal precedence: × first, then + and − left to right."""
        digits, ops = list(self.digits), list(self.ops)
        while "mul" in ops:
            i = ops.index("mul")
            digits[i : i + 2] = [digits[i] * digits[i + 1]]
            del ops[i]
        value = digits[0]
        for op, d in zip(ops, digits[1:], strict=True):
            value = _apply(op, value, d)
        return value

    @property
    def text(self) -> str:
        return "".join(f"{d}{op}" for d, op in zip(self.digits, self.ops, strict=False)) + str(
            self.digits[-1]
        )


def operator_of_filler(ctx: GenContext, filler_name: str) -> str:
    """A filler's operator, from the seeded generator keyed by the filler (the original hashed a path)."""
    return OPERATORS[int(ctx.rng("AudioOperator", "filler", filler_name).integers(len(OPERATORS)))]


@functools.cache
def _binary_candidates(op: str) -> tuple[Expression, ...]:
    pairs = itertools.product(DIGITS, repeat=2)
    return tuple(Expression((a, b), (op,)) for a, b in pairs if op != "sub" or a >= b)


@functools.cache
def _ternary_candidates(other: str) -> tuple[Expression, ...]:
    out = []
    for a, b, c in itertools.product(DIGITS, repeat=3):
        for ops in (("mul", other), (other, "mul")):
            expr = Expression((a, b, c), ops)
            if expr.value >= 0:
                out.append(expr)
    return tuple(out)


def _prepared_filler(wave: np.ndarray) -> np.ndarray:
    return dsp.fade(dsp.trim_silence(wave, SAMPLE_RATE), SAMPLE_RATE, FADE_MS)


def _render_clip(
    ctx: GenContext, spec: TaskSpec, index: int, slot: int, voice: str, expr: Expression, fillers
):
    """Digit, 25 ms gap, filler, 25 ms gap, digit (and again for three digits)."""
    rng = ctx.rng(spec.name, index, "clip", slot)
    gap = np.zeros(int(GAP_SECONDS * SAMPLE_RATE), dtype=np.float32)
    parts = [ctx.sources.digits.digit(voice, expr.digits[0], rng)]
    for op, d in zip(expr.ops, expr.digits[1:], strict=True):
        parts += [gap, fillers()[op], gap, ctx.sources.digits.digit(voice, d, rng)]
    return np.concatenate(parts).astype(np.float32)


def _transcript(expr: Expression, names: dict[str, str]) -> str:
    """The spoken digits and, between them, each sound by its name (not by what it stands for)."""
    parts: list[int | str] = [expr.digits[0]]
    for op, digit in zip(expr.ops, expr.digits[1:], strict=True):
        parts += [names[op], digit]
    return spoken_text(parts)


def _expressions(
    ctx: GenContext, rng: np.random.Generator, candidates: tuple[Expression, ...]
) -> list[tuple[int, Expression]]:
    """(slot, expression) of the episode's clips, demos first, the query last; a slot numbers an expression
    among the ``max(CLIPS_PER_FILLER, k + 1)`` made for the filler. The original draws that many distinct
    expressions and uses a random ``k + 1`` of them; with ``--label-prior balanced`` the query's value is
    drawn first, uniformly over the values the episode's operator(s) can give, then one of its expressions,
    and the other expressions as before around it."""
    made = max(CLIPS_PER_FILLER, ctx.n_clips)
    if ctx.options.label_prior == "original":
        expressions = [candidates[int(i)] for i in rng.choice(len(candidates), made, replace=False)]
        return [(int(slot), expressions[int(slot)]) for slot in rng.permutation(made)[: ctx.n_clips]]
    values = sorted({expr.value for expr in candidates})
    value = values[int(rng.integers(len(values)))]
    matching = [i for i, expr in enumerate(candidates) if expr.value == value]
    query = matching[int(rng.integers(len(matching)))]
    others = rng.choice(np.delete(np.arange(len(candidates)), query), ctx.n_clips - 1, replace=False)
    slots = rng.permutation(made)[: ctx.n_clips]
    chosen = [*(int(i) for i in others), query]
    return [(int(slot), candidates[i]) for slot, i in zip(slots, chosen, strict=True)]


def _episode(hard: bool, ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    rng = ctx.rng(spec.name, index, "episode")
    voices = ctx.sources.digits.voices
    voice = voices[int(rng.integers(len(voices)))]
    bank = ctx.sources.one_shots
    if hard:
        pair = [HARD_FILLER_BANK_OFFSET + 2 * index, HARD_FILLER_BANK_OFFSET + 2 * index + 1]
        # which of the two sounds means ×: drawn per episode (with a fixed order the × sound would always be an
        # even bank index, so one of 8 of the 16 percussion families, learnable across episodes)
        ctx.rng(spec.name, index, "mul-sound").shuffle(pair)
        mul_sound, other_sound = bank.get(pair[0]), bank.get(pair[1])
        other = ("add", "sub")[int(rng.integers(2))]
        sounds = {"mul": mul_sound.wave, other: other_sound.wave}
        names = {"mul": ctx.sound_name(mul_sound), other: ctx.sound_name(other_sound)}
        candidates = _ternary_candidates(other)
        prefix = (
            f"epi-{index:04d}__ops-mul_{other}__sfxmul-{mul_sound.name}__sfxoth-{other_sound.name}__expr-"
        )
        # neutral: the two sounds in name order, which says nothing about which one means x
        first, second = sorted((mul_sound.name, other_sound.name))
        neutral = f"epi-{index:04d}__sfx-{first}__sfx-{second}__"
    else:
        sound = bank.get(FILLER_BANK_OFFSET + index)
        op = operator_of_filler(ctx, sound.name)
        sounds = {op: sound.wave}
        names = {op: ctx.sound_name(sound)}
        candidates = _binary_candidates(op)
        prefix = neutral = f"epi-{index:04d}__sfx-{sound.name}__"
    fillers = functools.cache(lambda: {op: _prepared_filler(w) for op, w in sounds.items()})
    folder = "hard" if hard else "easy"
    clips, files = [], []
    for slot, expr in _expressions(ctx, rng, candidates):
        if ctx.options.file_names == "neutral":
            path = f"data/audiooperator/{folder}/{neutral}k-{slot:02d}.wav"
        else:
            path = f"data/audiooperator/{folder}/{prefix}{expr.text}__ans-{expr.value}__k-{slot:02d}.wav"
        clips.append((path, str(expr.value)))
        render = functools.partial(_render_clip, ctx, spec, index, slot, voice, expr, fillers)
        files.append(PlannedFile(path, render, functools.partial(_transcript, expr, names)))
    return PlannedEpisode(single_clip_episode(ctx, spec, index, clips), tuple(files))


def _check(options: BuildOptions) -> None:
    fewest = len(_binary_candidates("sub"))
    if options.max_shots + 1 > fewest:
        raise AudioICLError(f"AudioOperator needs k <= {fewest - 1} (distinct expressions per filler)")


_RECIPE = (
    f"Spoken digit a, {GAP_SECONDS * 1000:.0f} ms gap, a percussive 'filler' sound, {GAP_SECONDS * 1000:.0f} ms "
    f"gap, spoken digit b (digits 1-9; each part trimmed of silence, {FADE_MS:.0f} ms fades). The filler stands "
    "for +, − or ×, fixed per filler; the label is a op b (for −, a ≥ b). One filler and one voice per episode; "
    f"{CLIPS_PER_FILLER} distinct expressions are drawn per filler and max(k) + 1 of them used "
    "(file names keep the original's `k-<slot>` numbering). The query's value is drawn uniformly over the "
    "values the episode's operator can give, then one of its expressions (`--label-prior original`: the "
    "expression is drawn uniformly, so values such as 0 for − or 10 for + are common)."
)
_HARD_RECIPE = (
    "Three spoken digits and two fillers (same gaps and fades): one filler means ×, the other + or − (fixed "
    "per episode); × comes first or second. The label is the value with normal precedence (× before + and −); "
    "only non-negative values are used, as in the original's labels."
)
_DIFFERENCES = (
    "The operator of a filler comes from the seeded random generator (the original derived it from a hash of "
    "the file's absolute path, not reproducible across machines). Digits are spoken by espeak-ng voices (one "
    "per episode) unless `--source digits=DIR` (FSDD) is given; fillers are synthesized one-shots unless "
    "`--source one-shots=DIR`. File names start with `epi-<episode>__` so that no two episodes share a file; "
    "they name the filler sound(s) and the slot, not the expression or its value (`--file-names original`: "
    "`..._<expression>__ans-<value>__...`)."
)

_INSTRUCTION = (
    "Each audio clip below comes with a label. In every clip a spoken digit, a sound effect and another "
    "spoken digit follow each other (the harder clips have three digits and two sound effects). Each sound "
    "effect stands for an arithmetic operation, the same one throughout this set, and the label is the "
    "result of the spoken expression with the usual precedence. Work out which operation each sound stands "
    "for from the labelled examples and compute the query. Answer with a single integer only."
)

AUDIO_OPERATOR = register(
    TaskSpec(
        "AudioOperator",
        2,
        "operator",
        label_set(binary_values(), "a op b results"),
        "integer",
        _INSTRUCTION,
        generator=TaskGenerator(
            functools.partial(_episode, False), _RECIPE, _DIFFERENCES, check=_check, cost_ms=10.0
        ),
    )
)
AUDIO_OPERATOR_HARD = register(
    TaskSpec(
        "AudioOperatorHard",
        5,
        "operator",
        label_set(ternary_values(), "a op b op c results"),
        "integer",
        _INSTRUCTION,
        generator=TaskGenerator(
            functools.partial(_episode, True), _HARD_RECIPE, _DIFFERENCES, check=_check, cost_ms=14.0
        ),
    )
)
