"""Episode generators: record structure, label rules and the audio they render (without writing files)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from audioicl.audio import SAMPLE_RATE
from audioicl.sources.banks import SoundSources
from audioicl.synth.dsp import rms
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


def _silence_seconds(wave: np.ndarray) -> float:
    return longest_zero_run(wave) / SAMPLE_RATE


def test_length_labels_and_silence():
    planned = plan("AudioLength", 2)
    for file, clip in zip(planned.files, planned.episode.clips(), strict=True):
        seconds = int(clip.label)
        wave = file.render()
        assert len(wave) == seconds * SAMPLE_RATE
        zeros = longest_zero_run(wave)
        assert 0.2 * SAMPLE_RATE <= zeros <= min(1.5, seconds / 4) * SAMPLE_RATE + 1


def test_length_hard_label_is_non_silent_seconds():
    """The label is the seconds that are not digital silence; an all-silent clip (label 0) is a floor of at most
    one 16-bit step of its own (issue 53, item 5: every 4 s label-0 clip was the same file of zeros, so a query
    was byte-identical to a demo of its own label)."""
    from audioicl.perception.measure import SILENCE_LEVEL, non_silent_seconds

    silent_clips: dict[int, list[bytes]] = {}
    for i in range(8):
        planned = plan("AudioLengthHard", i)
        for file, clip in zip(planned.files, planned.episode.clips(), strict=True):
            wave = file.render()
            assert round(non_silent_seconds(wave, SAMPLE_RATE)) == int(clip.label), clip.audio_path
            if clip.label == "0":
                assert np.all(np.abs(wave) < SILENCE_LEVEL) and np.any(wave), clip.audio_path
                silent_clips.setdefault(len(wave), []).append(wave.tobytes())
            else:
                assert longest_zero_run(wave) // SAMPLE_RATE <= 10
    assert silent_clips
    for waves in silent_clips.values():
        assert len(set(waves)) == len(waves)  # no two all-silent clips of a length alike


@pytest.mark.parametrize("task", ["AudioLength", "AudioLengthHard"])
def test_length_clips_never_reach_full_scale_and_fade_at_every_cut(task):
    """Fragments are scaled under full scale; the sound fades into and out of the silence block (no step
    larger than the noise floor's own) and at the clip's edges; the original reaches full scale."""
    clean_peaks, original_peaks = [], []
    for i in range(6):
        planned = plan(task, i)
        for file in planned.files:
            wave = file.render()
            clean_peaks.append(float(np.max(np.abs(wave))))
            if not np.any(wave):
                continue
            assert abs(wave[0]) < 1e-3 and abs(wave[-1]) < 1e-3
            zero = np.flatnonzero(np.diff(np.concatenate([[0], wave == 0, [0]]).astype(np.int8)))
            for start, stop in zip(zero[::2], zero[1::2], strict=True):
                if stop - start >= SAMPLE_RATE // 10:  # the silence block
                    if start > 0:
                        assert abs(wave[start - 1]) < 1e-3
                    if stop < len(wave):
                        assert abs(wave[stop]) < 1e-3
        for file in plan(task, i, context(length_audio="original")).files:
            original_peaks.append(float(np.max(np.abs(file.render()))))
    assert max(clean_peaks) <= 0.9
    assert max(original_peaks) > 1.0


def _value(expr: str) -> int:
    return int(eval(expr.replace("mul", "*").replace("add", "+").replace("sub", "-")))  # noqa: S307


ORIGINAL_NAMES = {"file_names": "original"}


def test_operator_labels_follow_the_expression_and_one_operator_per_filler():
    for i in range(12):
        ep = plan("AudioOperator", i, context(**ORIGINAL_NAMES)).episode
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
        ep = plan("AudioOperatorHard", i, context(**ORIGINAL_NAMES)).episode
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


def test_operator_hard_mul_sound_is_not_predictable_across_episodes():
    """Which of an episode's two filler sounds means × is drawn per episode: with a fixed order it was always
    the even bank index, i.e. one of 8 of the 16 percussion families, which a model could learn across
    episodes. The original-named files say which sound is ×."""
    families, parities = set(), set()
    for i in range(40):
        clip = next(plan("AudioOperatorHard", i, context(**ORIGINAL_NAMES)).episode.clips())
        name = re.search(r"__sfxmul-(\w+?)__sfxoth-", clip.audio_path).group(1)
        family, number = name.rsplit("_", 1)
        families.add(family)
        parities.add(int(number) % 2)
    assert parities == {0, 1}
    assert len(families) > 8


@pytest.mark.parametrize("task", ["AudioOperator", "AudioOperatorHard"])
def test_operator_neutral_names_only_rename_the_original_clips(task):
    """Neutral names hold the episode, the filler sound(s) and the slot, never the expression or its value;
    the audio and labels are those of the original-named build."""
    for i in range(4):
        neutral, original = plan(task, i), plan(task, i, context(**ORIGINAL_NAMES))
        assert [c.label for c in neutral.episode.clips()] == [c.label for c in original.episode.clips()]
        for clip, file, named in zip(neutral.episode.clips(), neutral.files, original.files, strict=True):
            assert not re.search(r"ans|expr|mul|add|sub", clip.audio_path)
            assert clip.audio_path.rsplit("__", 1)[1] == named.path.rsplit("__", 1)[1]  # k-<slot>.wav
            np.testing.assert_array_equal(file.render(), named.render())


def test_operator_clip_is_digit_gap_filler_gap_digit():
    file = plan("AudioOperator", 0).files[0]
    wave = file.render()
    assert 0.3 * SAMPLE_RATE < len(wave) < 4 * SAMPLE_RATE
    assert longest_zero_run(wave) >= int(0.025 * SAMPLE_RATE)


def _mix(demo_or_query):
    return demo_or_query.clips[-1]


def _pattern(mix) -> str:
    return re.search(r"MIX__([AB]{3})__", mix.audio_path).group(1)


def test_remap_own_pairs_never_show_the_query_mix():
    for i in range(15):
        ep = plan("AudioRemap", i, context(**ORIGINAL_NAMES)).episode
        demo_mixes = {_mix(d).audio_path for d in ep.demos}
        assert _mix(ep.query).audio_path not in demo_mixes
        patterns = [_pattern(_mix(d)) for d in ep.demos]
        assert len(set(patterns)) == 5 and set(patterns) <= set(PATTERNS)
        pairs = {(d.clips[0].audio_path, d.clips[1].audio_path) for d in ep.demos}
        assert len(pairs) == 5
        for shot in [*ep.demos, ep.query]:
            a, b, mix = shot.clips
            assert (a.role, b.role, mix.role) == ("A", "B", "MIX") and a.label != b.label
            spelled = "".join(a.label if c == "A" else b.label for c in _pattern(mix))
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
    planned = plan("AudioRemap", 0, context(**ORIGINAL_NAMES))
    waves = {f.path: f.render() for f in planned.files}
    a, b, mix = planned.episode.demos[0].clips
    first = waves[a.audio_path] if _pattern(mix)[0] == "A" else waves[b.audio_path]
    np.testing.assert_array_equal(waves[mix.audio_path][: len(first)], first)


@pytest.mark.parametrize("lengths", ["equal", "original"])
def test_remap_references_of_a_pair_have_one_length_and_level(lengths):
    """Equal lengths and levels (default): a MIX's duration and RMS are the same for every pattern, so they
    say nothing about how many A's it holds; the original's one-shots differ in length."""
    unequal = 0
    for i in range(6):
        planned = plan("AudioRemap", i, context(remap_lengths=lengths))
        waves = {f.path: f.render() for f in planned.files}
        for shot in [*planned.episode.demos, planned.episode.query]:
            a, b, mix = (waves[c.audio_path] for c in shot.clips)
            if lengths == "original":
                unequal += len(a) != len(b)
                continue
            assert len(a) == len(b) and len(mix) == 3 * len(a) + 2 * int(0.15 * SAMPLE_RATE)
            assert np.isclose(rms(a), rms(b), rtol=1e-4)
            assert np.isclose(rms(mix) ** 2 * len(mix), 3 * rms(a) ** 2 * len(a), rtol=1e-3)
    assert lengths == "equal" or unequal > 20


@pytest.mark.parametrize("order", ["shuffled", "original"])
def test_anomaly_records(order):
    ctx = context(anomaly_order=order)
    labels, orders = set(), Counter()
    for i in range(12):
        ep = plan("AnomalyDetect", i, ctx).episode
        assert ep.object in ctx.sources.machines.types
        assert len(ep.demos) == 5
        for demo in ep.demos:
            roles = tuple(c.role for c in demo.clips)
            assert sorted(roles) == ["Anomalous", "Normal"] and all(c.label == c.role for c in demo.clips)
            assert all(f"data/anomalous/{ep.object}/" in c.audio_path for c in demo.clips)
            orders[roles] += 1
        (query,) = ep.query.clips
        assert query.role == "Query" and query.label is None and ep.query.label in ("Normal", "Anomalous")
        assert len({c.audio_path for c in ep.clips()}) == 11
        labels.add(ep.query.label)
    assert labels == {"Normal", "Anomalous"}
    if order == "original":
        assert set(orders) == {("Normal", "Anomalous")}
    else:  # drawn per demo: both orders, neither far from half of the 60 pairs
        assert 18 <= orders["Normal", "Anomalous"] <= 42


def test_shots_change_only_the_list_length():
    ep = plan("MorseCode", 0, context(shots=(0, 8))).episode
    assert len(ep.demos) == 8
    assert plan("MorseCode", 0, context(shots=(0,))).episode.demos == ()


# --------------------------------------------------------------------------- shortcuts closed (issue 8)


def episodes_of(task: str, n: int, **options) -> list:
    ctx = context(episodes=n, **options)
    return [plan(task, i, ctx).episode for i in range(n)]


@pytest.mark.parametrize("task", task_names())
def test_no_query_clip_serves_two_episodes(task):
    """Every query clip is used by its episode alone: not another episode's query, nor any episode's demo."""
    episodes = episodes_of(task, 40)
    queries = [ep.query.target.audio_path for ep in episodes]
    assert len(set(queries)) == len(queries)
    for ep in episodes:
        others = {c.audio_path for other in episodes if other is not ep for c in other.clips()}
        assert ep.query.target.audio_path not in others, ep.id


@pytest.mark.parametrize("task", ["AudioLength", "AudioLengthHard", "MorseCode", "AnomalyDetect"])
def test_original_queries_recur(task):
    episodes = episodes_of(task, 60, queries="original")
    queries = Counter(ep.query.target.audio_path for ep in episodes)
    demos = {c.audio_path for ep in episodes for d in ep.demos for c in d.clips}
    assert max(queries.values()) > 1 or set(queries) & demos


def test_morse_query_words_are_distinct_and_never_demos():
    episodes = episodes_of("MorseCode", 300)
    words = [ep.query.label for ep in episodes]
    demo_words = {d.label for ep in episodes for d in ep.demos}
    assert len(set(words)) == 300 and not set(words) & demo_words


@pytest.mark.parametrize(
    "task, labels",
    [
        ("AudioCount", range(1, 9)),
        ("AudioCountHard", range(1, 9)),
        ("AudioLength", range(1, 21)),
        ("AudioLengthHard", range(0, 21)),
        ("AnomalyDetect", ("Normal", "Anomalous")),
    ],
)
def test_query_labels_are_balanced(task, labels):
    n = 2 * len(labels) + 3
    counts = Counter(ep.query.label for ep in episodes_of(task, n))
    assert set(counts) == {str(v) for v in labels}
    assert max(counts.values()) - min(counts.values()) <= 1


def test_anomaly_machine_types_are_balanced():
    counts = Counter(ep.object for ep in episodes_of("AnomalyDetect", 30))
    assert len(counts) == 7 and max(counts.values()) - min(counts.values()) <= 1


def test_remap_query_patterns_are_balanced():
    patterns = Counter(_pattern(_mix(ep.query)) for ep in episodes_of("AudioRemap", 60, **ORIGINAL_NAMES))
    assert set(patterns.values()) == {10}


def test_length_hard_demo_labels_are_uniform_and_the_original_is_skewed():
    """Balanced: label 1 is about 1/21 of all clips; the original's draw (L, then s) makes it about 12 %."""
    for prior, low, high in (("balanced", 0.02, 0.08), ("original", 0.09, 0.2)):
        episodes = episodes_of("AudioLengthHard", 120, label_prior=prior)
        labels = [c.label for ep in episodes for c in ep.clips()]
        assert low < labels.count("1") / len(labels) < high, prior


def test_operator_query_values_are_uniform_over_what_the_operator_gives():
    """Balanced: for a − filler the query's value is 0..8 uniformly (0 about 1/9, not 9/45 = 1/5)."""
    shares = {}
    for prior in ("balanced", "original"):
        ctx = context(episodes=400, label_prior=prior, **ORIGINAL_NAMES)
        values = []
        for i in range(400):
            ep = plan("AudioOperator", i, ctx).episode
            if "sub" in ep.query.target.audio_path:
                values.append(ep.query.label)
        shares[prior] = values.count("0") / len(values)
    assert shares["balanced"] < 0.15 < shares["original"]


def _background_db(wave: np.ndarray) -> float:
    """The background's level: the 5th percentile of 20 ms frame RMS (the hits leave most frames alone)."""
    frames = wave[: len(wave) // 320 * 320].reshape(-1, 320).astype(np.float64)
    return float(20 * np.log10(np.percentile(np.sqrt((frames**2).mean(axis=1)), 5)))


def test_count_hard_background_level_does_not_follow_the_count():
    correlation = {}
    for level in ("sound-level", "original"):
        ctx = context(count_background=level)
        rs = []
        for i in range(5):
            planned = plan("AudioCountHard", i, ctx)
            counts = [int(c.label) for c in planned.episode.clips()]
            levels = [_background_db(f.render()) for f in planned.files]
            rs.append(np.corrcoef(counts, levels)[0, 1])
        correlation[level] = float(np.mean(rs))
    assert correlation["sound-level"] < 0.4 and correlation["original"] > 0.7


def _answers(ep) -> list[tuple]:
    """(clip, what a file name could give away) for every clip that carries an answer: its label, a remap
    MIX's pattern, a machine recording's Normal/Anomalous."""
    if ep.task == "AnomalyDetect":
        return [(c, c.label) for d in ep.demos for c in d.clips] + [(ep.query.target, ep.query.label)]
    if ep.task == "AudioRemap":
        out = []
        for shot, label in [(d, d.label) for d in ep.demos] + [(ep.query, ep.query.label)]:
            a, _, mix = shot.clips
            out.append((mix, "".join("A" if ch == a.label else "B" for ch in label)))
        return out
    return [(d.clips[0], d.label) for d in ep.demos] + [(ep.query.target, ep.query.label)]


def _readable(clip, answer: str) -> bool:
    name = clip.audio_path.rsplit("/", 1)[1].lower()
    if answer in ("Normal", "Anomalous"):
        return ("anomal" if answer == "Anomalous" else "_normal_") in name
    return answer.lower() in re.split(r"[^a-z0-9]+", name[: -len(".wav")])


@pytest.mark.parametrize("task", task_names())
def test_file_names_hold_no_label(task):
    """Neutral names: no label (nor remap pattern, nor normal/anomaly word) in any file name, and no folder
    that sorts clips by label; the original's names hold every one."""
    for names in ("neutral", "original"):
        answers = [a for ep in episodes_of(task, 6, file_names=names) for a in _answers(ep)]
        readable = [_readable(clip, answer) for clip, answer in answers]
        assert not any(readable) if names == "neutral" else all(readable), (task, names)
        folders: dict[str, set[str]] = {}
        for clip, answer in answers:
            folders.setdefault(clip.audio_path.rsplit("/", 1)[0], set()).add(answer)
        if names == "neutral":
            assert len(folders) == 1 or all(len(labels) > 1 for labels in folders.values())
