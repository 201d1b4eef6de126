"""Episode generators: record structure, label rules and the audio they render (without writing files)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from audioicl.audio import SAMPLE_RATE
from audioicl.sources import SoundSources
from audioicl.tasks import TASKS, task_names
from audioicl.tasks.context import BuildOptions, GenContext
from audioicl.tasks.count import MIN_GAP_SECONDS
from audioicl.tasks.remap import PATTERNS

SINGLE_CLIP = [n for n in task_names() if not TASKS.get(n).multi_clip]
FOLDERS = {
    "AudioCount": "data/audiocount/easy/",
    "AudioCountHard": "data/audiocount/hard/",
    "AudioOperator": "data/audiooperator/easy/",
    "AudioOperatorHard": "data/audiooperator/hard/",
    "AudioLength": "data/audiolength/easy/",
    "AudioLengthHard": "data/audiolength/hard/",
    "MorseCode": "data/MorseCode/words/wav/",
}


def context(**options) -> GenContext:
    opts = BuildOptions(**options)
    return GenContext(opts, SoundSources.create(opts.seed, opts.sources))


def plan(task: str, index: int, ctx: GenContext | None = None):
    spec = TASKS.get(task)
    return spec.generator.episode(ctx or context(), spec, index)


def runs_of_sound(wave: np.ndarray, min_gap: int) -> int:
    """Number of stretches of non-zero samples separated by at least ``min_gap`` exact zeros."""
    nonzero = np.flatnonzero(wave != 0)
    if nonzero.size == 0:
        return 0
    return 1 + int(np.sum(np.diff(nonzero) > min_gap))


def longest_zero_run(wave: np.ndarray) -> int:
    padded = np.concatenate([[1.0], wave, [1.0]])
    edges = np.flatnonzero(np.diff((padded == 0).astype(np.int8)))
    return int(np.max(edges[1::2] - edges[::2])) if edges.size else 0


def test_every_task_has_a_generator():
    assert all(TASKS.get(name).generator is not None for name in task_names())


@pytest.mark.parametrize("task", SINGLE_CLIP)
def test_single_clip_records(task):
    spec = TASKS.get(task)
    ctx = context()
    planned = plan(task, 3, ctx)
    ep = planned.episode
    assert ep.id == f"AudioICL{spec.order * 300 + 4:05d}" and ep.task == task
    assert len(ep.demos) == 5 and not ep.query.multi
    clips = [d.clips[0] for d in ep.demos] + [ep.query.clips[0]]
    assert len({c.audio_path for c in clips}) == 6  # no clip twice in an episode
    for clip in clips:
        assert isinstance(clip.label, str) and clip.label in spec.labels
        assert clip.audio_path.startswith(FOLDERS[task]) and clip.audio_path.endswith(".wav")
    assert {f.path for f in planned.files} == {c.audio_path for c in clips}
    assert plan(task, 3, ctx).episode == ep  # a pure function of (seed, task, index)


def test_count_labels_distinct_by_default_and_independent_on_request():
    for i in range(20):
        labels = [d.label for d in plan("AudioCount", i).episode.demos] + [
            plan("AudioCount", i).episode.query.label
        ]
        assert len(set(labels)) == 6
    independent = context(count_labels="independent")
    repeated = 0
    for i in range(20):
        ep = plan("AudioCount", i, independent).episode
        labels = [d.label for d in ep.demos] + [ep.query.label]
        paths = [d.clips[0].audio_path for d in ep.demos] + [ep.query.target.audio_path]
        repeated += len(set(labels)) < 6
        assert len(set(paths)) == 6
    assert repeated > 0


@pytest.mark.parametrize("task", ["AudioCount", "AudioCountHard"])
def test_count_clip_holds_r_separate_copies(task):
    planned = plan(task, 1)
    for file, clip in zip(planned.files, planned.episode.clips(), strict=True):
        wave = file.render()
        assert len(wave) == 10 * SAMPLE_RATE
        if task == "AudioCount":
            assert runs_of_sound(wave, int(MIN_GAP_SECONDS * SAMPLE_RATE) - 1) == int(clip.label)
        else:
            assert np.count_nonzero(wave == 0) < SAMPLE_RATE  # background everywhere
            assert np.max(np.abs(wave)) <= 1.0


def test_count_hard_uses_the_easy_episodes_sound():
    easy, hard = plan("AudioCount", 7).episode, plan("AudioCountHard", 7).episode
    assert (
        easy.query.target.audio_path.split("/")[-1].rsplit("_", 1)[0]
        == (hard.query.target.audio_path.split("/")[-1].rsplit("_", 1)[0])
    )


def test_length_labels_and_silence():
    planned = plan("AudioLength", 2)
    for file, clip in zip(planned.files, planned.episode.clips(), strict=True):
        seconds, _ = map(int, re.fullmatch(r".*/(\d+)_(\d+)\.wav", clip.audio_path).groups())
        assert int(clip.label) == seconds
        wave = file.render()
        assert len(wave) == seconds * SAMPLE_RATE
        zeros = longest_zero_run(wave)
        assert 0.2 * SAMPLE_RATE <= zeros <= min(1.5, seconds / 4) * SAMPLE_RATE + 1


def test_length_hard_label_is_non_silent_seconds():
    seen_zero_label = False
    for i in range(8):
        planned = plan("AudioLengthHard", i)
        for file, clip in zip(planned.files, planned.episode.clips(), strict=True):
            label, silence, _ = map(int, re.fullmatch(r".*/(\d+)_(\d+)_(\d+)\.wav", clip.audio_path).groups())
            assert int(clip.label) == label and silence <= 10
            if silence >= 2 or label == 0:
                wave = file.render()
                assert len(wave) == (label + silence) * SAMPLE_RATE
                assert longest_zero_run(wave) >= silence * SAMPLE_RATE
                seen_zero_label |= label == 0 and not np.any(wave)
    assert seen_zero_label


def _value(expr: str) -> int:
    return int(eval(expr.replace("mul", "*").replace("add", "+").replace("sub", "-")))  # noqa: S307


def test_operator_labels_follow_the_expression_and_one_operator_per_filler():
    for i in range(12):
        ep = plan("AudioOperator", i).episode
        ops = set()
        for clip in ep.clips():
            m = re.fullmatch(
                r".*__sfx-(\w+?)__(\d)(add|sub|mul)(\d)__ans-(\d+)__k-\d\d\.wav", clip.audio_path
            )
            a, op, b, ans = int(m.group(2)), m.group(3), int(m.group(4)), int(m.group(5))
            ops.add(op)
            assert ans == int(clip.label) == _value(f"{a}{op}{b}")
            assert op != "sub" or a >= b
        assert len(ops) == 1


def test_operator_hard_has_precedence_one_mul_and_a_fixed_other():
    for i in range(12):
        ep = plan("AudioOperatorHard", i).episode
        others = set()
        for clip in ep.clips():
            m = re.fullmatch(
                r".*__ops-mul_(add|sub)__.*__expr-(\w+)__ans-(\d+)__k-\d\d\.wav", clip.audio_path
            )
            expr = m.group(2)
            assert expr.count("mul") == 1 and int(clip.label) == int(m.group(3)) == _value(expr) >= 0
            others.add(m.group(1))
            assert m.group(1) in expr
        assert len(others) == 1


def test_operator_clip_is_digit_gap_filler_gap_digit():
    file = plan("AudioOperator", 0).files[0]
    wave = file.render()
    assert 0.3 * SAMPLE_RATE < len(wave) < 4 * SAMPLE_RATE
    assert longest_zero_run(wave) >= int(0.025 * SAMPLE_RATE)


def _mix(demo_or_query):
    return demo_or_query.clips[-1]


def test_remap_own_pairs_never_show_the_query_mix():
    for i in range(15):
        ep = plan("AudioRemap", i).episode
        demo_mixes = {_mix(d).audio_path for d in ep.demos}
        assert _mix(ep.query).audio_path not in demo_mixes
        patterns = [re.search(r"MIX__([AB]{3})__", _mix(d).audio_path).group(1) for d in ep.demos]
        assert len(set(patterns)) == 5 and set(patterns) <= set(PATTERNS)
        pairs = {(d.clips[0].audio_path, d.clips[1].audio_path) for d in ep.demos}
        assert len(pairs) == 5
        for shot in [*ep.demos, ep.query]:
            a, b, mix = shot.clips
            assert (a.role, b.role, mix.role) == ("A", "B", "MIX") and a.label != b.label
            pattern = re.search(r"MIX__([AB]{3})__", mix.audio_path).group(1)
            spelled = "".join(a.label if c == "A" else b.label for c in pattern)
            assert (mix.label or ep.query.label) == spelled
        assert _mix(ep.query).label is None and ep.query.multi


def test_remap_same_pair_reproduces_the_original_leak():
    ctx = context(remap_demos="same-pair")
    leaks = 0
    for i in range(12):
        ep = plan("AudioRemap", i, ctx).episode
        assert len({(d.clips[0].audio_path, d.clips[1].audio_path, d.clips[0].label) for d in ep.demos}) == 1
        leaks += _mix(ep.query).audio_path in {_mix(d).audio_path for d in ep.demos}
    assert leaks > 0


def test_remap_mix_is_the_pattern_of_its_references():
    planned = plan("AudioRemap", 0)
    waves = {f.path: f.render() for f in planned.files}
    a, b, mix = planned.episode.demos[0].clips
    pattern = re.search(r"MIX__([AB]{3})__", mix.audio_path).group(1)
    first = waves[a.audio_path] if pattern[0] == "A" else waves[b.audio_path]
    np.testing.assert_array_equal(waves[mix.audio_path][: len(first)], first)


def test_anomaly_records():
    ctx = context()
    labels = set()
    for i in range(6):
        ep = plan("AnomalyDetect", i, ctx).episode
        assert ep.object in ctx.sources.machines.types
        assert len(ep.demos) == 5
        for demo in ep.demos:
            assert [(c.role, c.label) for c in demo.clips] == [
                ("Normal", "Normal"),
                ("Anomalous", "Anomalous"),
            ]
            assert all(f"data/anomalous/{ep.object}/" in c.audio_path for c in demo.clips)
        (query,) = ep.query.clips
        assert query.role == "Query" and query.label is None and ep.query.label in ("Normal", "Anomalous")
        assert len({c.audio_path for c in ep.clips()}) == 11
        labels.add(ep.query.label)
    assert labels == {"Normal", "Anomalous"}


def test_shots_change_only_the_list_length():
    ep = plan("MorseCode", 0, context(shots=(0, 8))).episode
    assert len(ep.demos) == 8
    assert plan("MorseCode", 0, context(shots=(0,))).episode.demos == ()
