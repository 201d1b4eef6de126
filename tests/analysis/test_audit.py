"""The audit's statistics and shortcut rules, on records made by hand (no audio unless stated)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from audioicl import Episode
from audioicl.analysis import audit
from audioicl.analysis.audit import ClipInfo
from audioicl.perception.measure import LevelFeatures, level_features
from audioicl.records import Clip, Demo, Query


def single(task: str, labels: list[str], query: str, name: str = "") -> Episode:
    demos = tuple(Demo((Clip(f"d/{task}{name}_demo{i}.wav", label),)) for i, label in enumerate(labels))
    target = f"d/{task}_{name or 'q'}.wav"
    return Episode("AudioICL00001", task, demos, Query((Clip(target, query),), query))


def test_entropy_and_label_stats():
    assert audit.entropy_bits(["a", "b", "a", "b"]) == pytest.approx(1.0)
    assert audit.entropy_bits(["a"] * 5) == 0.0
    stats = audit.label_stats(["1", "1", "1", "2"], space=8)
    assert (stats.majority, stats.majority_share, stats.distinct, stats.max_bits) == ("1", 0.75, 2, 3.0)


def test_fold_majority_never_counts_the_held_out_fold():
    keys = ["a"] * 10 + ["b"] * 3
    groups = [f"g{i}" for i in range(13)]
    predictions = audit.fold_majority(keys, groups)
    assert all(p == {"a"} for p in predictions)
    # one clip serving every "a" episode: its fold holds them all, the other folds see only "b"
    shared = ["same"] * 10 + groups[10:]
    assert audit.fold_majority(keys, shared)[0] == {"b"}


def test_fold_of_is_stable_per_group():
    assert audit.fold_of("data/x.wav") == audit.fold_of("data/x.wav")
    assert {audit.fold_of(f"c{i}") for i in range(200)} == set(range(audit.FOLDS))


def test_reuse_counts_recurring_clips_once_per_episode():
    stats = audit.reuse([["q1"], ["q1"], ["q2"], ["q1"]], {"q1": "data/q1.wav"})
    assert (stats.clips, stats.slots, stats.recurring, stats.episodes, stats.max_uses) == (2, 4, 1, 3, 3)
    assert stats.example == "data/q1.wav (3 episodes)"
    assert audit.reuse([["a", "a"], ["b"]], {}).recurring == 0


def test_interpolate_inside_and_beyond_the_points():
    assert audit.interpolate([0.0, 1.0, 2.0], [1.0, 3.0, 5.0], 1.5) == pytest.approx(4.0)
    assert audit.interpolate([0.0, 1.0, 2.0], [1.0, 3.0, 5.0], 3.0) == pytest.approx(7.0)  # LS slope 2
    assert audit.interpolate([0.0, 0.0], [2.0, 4.0], 5.0) == 3.0  # one x: its mean


def test_knn_predict_majority_of_the_nearest():
    xs = np.array([0.0, 0.1, 0.2, 5.0, 5.1])
    ys = ["a", "a", "b", "c", "c"]
    assert audit.knn_predict(xs, ys, 0.05, neighbours=3) == "a"
    assert audit.knn_predict(xs, ys, 5.2, neighbours=2) == "c"


def test_name_tokens_and_position_rules():
    assert audit.name_tokens("data/audiooperator/easy/sfx-100052__2mul7__ans-14__k-03.wav") == [
        "sfx",
        "100052",
        "2mul7",
        "ans",
        "14",
        "k",
        "03",
    ]
    ep = single("AudioCount", ["1"], "5", name="00984_wood_hit_4_5")
    assert audit.position_rule(-1, spell=False)(ep) == "5"
    assert audit.position_rule(9, spell=False)(ep) is None


def remap(index: int, pattern: str, letters: tuple[str, str], mix: str) -> Episode:
    a, b = letters
    label = "".join(a if c == "A" else b for c in pattern)
    demo_mix = "ABB" if pattern != "ABB" else "AAB"
    demo = Demo(
        (
            Clip(f"r/a{index}.wav", a, "A"),
            Clip(f"r/b{index}.wav", b, "B"),
            Clip(f"r/d{index}.wav", "".join(a if c == "A" else b for c in demo_mix), "MIX"),
        ),
        multi=True,
    )
    query = Query(
        (Clip(f"r/a{index}.wav", a, "A"), Clip(f"r/b{index}.wav", b, "B"), Clip(mix, None, "MIX")),
        label,
        True,
    )
    return Episode(f"AudioICL0{2101 + index}", "AudioRemap", (demo,), query)


def test_names_shortcut_reads_labels_in_names_and_not_in_neutral_names():
    rng = np.random.default_rng(0)
    patterns = ("AAB", "ABA", "BAB", "BAA", "ABB", "BBA")
    letters = [tuple(rng.choice(list("CDEFGHIJKLMNOPQRSTUVWXYZ"), 2, replace=False)) for _ in range(120)]
    drawn = [patterns[int(rng.integers(6))] for _ in range(120)]
    leaky = [
        remap(i, p, lt, f"data/audioremap/MIX__{p}__ab{i:04d}.wav")
        for i, (p, lt) in enumerate(zip(drawn, letters, strict=True))
    ]
    accuracy, rule = audit.name_shortcut(leaky, [e.query.target.audio_path for e in leaky])
    assert accuracy == 1.0 and "spelled" in rule
    neutral = [
        remap(i, p, lt, f"data/audioremap/mix_{i:04d}.wav")
        for i, (p, lt) in enumerate(zip(drawn, letters, strict=True))
    ]
    accuracy, _ = audit.name_shortcut(neutral, [e.query.target.audio_path for e in neutral])
    assert accuracy < 0.3  # chance is 1/6


def test_names_shortcut_naive_bayes_reads_folders():
    eps = []
    for i in range(100):
        label = "Anomalous" if i % 2 else "Normal"
        split = "anomaly" if i % 2 else "normal"
        pair = Demo((Clip("n.wav", "Normal", "Normal"), Clip("a.wav", "Anomalous", "Anomalous")), True)
        query = Query((Clip(f"data/fan/test/section_00_{split}_{i:04d}.wav", None, "Query"),), label, True)
        eps.append(Episode(f"AudioICL{2401 + i:05d}", "AnomalyDetect", (pair,), query, {"object": "fan"}))
    accuracy, _ = audit.name_shortcut(eps, [e.query.target.audio_path for e in eps])
    assert accuracy == 1.0


def features(seconds: float, rms: float = 0.1, floor: float = 0.0, low: float = 0.0) -> ClipInfo:
    return ClipInfo(f"hash{seconds}{rms}{floor}{low}", LevelFeatures(seconds, rms, floor, low))


def test_remap_sum_of_parts_finds_how_many_as_the_mix_holds():
    """MIX duration = the parts' durations + the gaps (learned from the demo): the number of A's shows,
    so the answer is one of the three patterns with that many A's."""
    ep = remap(0, "AAB", ("P", "Q"), "r/q.wav")
    gap = 0.3
    infos = {
        "r/a0.wav": features(0.2),
        "r/b0.wav": features(0.5),
        "r/d0.wav": features(0.2 + 0.5 + 0.5 + gap),  # the demo's ABB
        "r/q.wav": features(0.2 + 0.2 + 0.5 + gap),  # the query's AAB
    }
    assert audit.remap_parts_expected(ep, infos, "duration") == pytest.approx(1 / 3)
    equal = dict(
        infos, **{"r/b0.wav": features(0.2), "r/d0.wav": features(0.6 + gap), "r/q.wav": features(0.6 + gap)}
    )
    assert audit.remap_parts_expected(ep, equal, "duration") == pytest.approx(1 / 6)


def test_within_episode_interpolates_numbers_among_admissible_answers():
    ep = single("AudioCount", ["1", "2", "4", "5", "6"], "3")
    level = {
        f"d/AudioCount_demo{i}.wav": features(10, rms=math.sqrt(int(v)))
        for i, v in enumerate(["1", "2", "4", "5", "6"])
    }
    level["d/AudioCount_q.wav"] = features(10, rms=math.sqrt(3))
    text = audit.TextOnly(best=("3", "7", "8"), admissible=("3", "7", "8"))
    assert audit.within_episode_expected(ep, level, "rms", text) == 1.0
    # every clip at one level: the feature tells nothing, so the rule is the text-only floor (1/3 here)
    flat = {path: features(10) for path in level}
    eight = single("AudioCount", ["1", "2", "4", "5", "6"], "8")
    assert audit.within_episode_expected(eight, flat, "rms", text) == pytest.approx(1 / 3)
    # levels within 1 dB of each other are one level
    close = {path: features(10, rms=1.0 + 0.01 * i) for i, path in enumerate(level)}
    assert audit.within_episode_expected(eight, close, "rms", text) == pytest.approx(1 / 3)


def test_beyond_normal_counts_anomalous_clips_outside_the_normal_range():
    demos = tuple(
        Demo((Clip(f"n{j}.wav", "Normal", "Normal"), Clip(f"a{j}.wav", "Anomalous", "Anomalous")), True)
        for j in range(3)
    )
    ep = Episode(
        "AudioICL02401",
        "AnomalyDetect",
        demos,
        Query((Clip("q.wav", None, "Query"),), "Normal", True),
        {"object": "fan"},
    )
    infos = {f"n{j}.wav": features(10, low=0.01 * (j + 1)) for j in range(3)}
    infos |= {
        "a0.wav": features(10, low=0.5),
        "a1.wav": features(10, low=0.02),
        "a2.wav": features(10, low=0.0001),
    }
    infos["q.wav"] = features(10, low=0.02)
    assert audit.beyond_normal([ep], infos)["low-freq"] == "fan 2/3"
    assert audit.demo_order([ep]) == "Normal then Anomalous in 3 of 3 demos"


def test_level_features_on_known_signals():
    sr = 16000
    t = np.arange(2 * sr) / sr
    low = level_features((0.5 * np.sin(2 * np.pi * 8 * t)).astype(np.float32), sr)
    high = level_features((0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), sr)
    assert low.seconds == high.seconds == 2.0
    assert low.rms == pytest.approx(0.5 / math.sqrt(2), rel=1e-3)
    assert low.low_share == pytest.approx(1.0, abs=0.02) and high.low_share < 0.01
    gated = np.concatenate([np.zeros(sr, np.float32), 0.3 * np.ones(sr, np.float32)])
    assert level_features(gated, sr).floor == 0.0
    assert level_features(np.zeros(0, np.float32), sr) == LevelFeatures(0.0, 0.0, 0.0, 0.0)


def test_audit_task_flags_a_copyable_query_and_exempts_the_published_floor(tmp_path: Path):
    """AudioRemap episodes whose query MIX is a demo MIX (the original's leak) fail by copy; AudioCount's
    elimination is the floor (baseline), not a failure."""
    eps = []
    for i in range(60):
        pattern = ("AAB", "ABA", "BAB")[i % 3]
        ep = remap(i, pattern, ("P", "Q"), f"r/d{i}.wav" if pattern != "ABB" else "r/x.wav")
        demo = ep.demos[0]
        mix = demo.clips[2]
        shown = Demo((demo.clips[0], demo.clips[1], Clip(mix.audio_path, ep.query.label, "MIX")), True)
        eps.append(Episode(ep.id, ep.task, (shown,), ep.query))
    infos = {c.audio_path: ClipInfo("path:" + c.audio_path, None) for ep in eps for c in ep.clips()}
    result = audit.audit_task("AudioRemap", 1, eps, infos, margin=5.0)
    assert result.query_in_own_demos == 60 and result.shortcut("copy").accuracy == 1.0
    assert any(f.startswith("copy ") for f in result.failures)
    assert result.shortcut("duration").accuracy is None  # no audio: not measured

    counts = [single("AudioCount", ["1", "2", "3", "4", "5"], str(6 + i % 3), name=str(i)) for i in range(30)]
    infos = {c.audio_path: ClipInfo("path:" + c.audio_path, None) for ep in counts for c in ep.clips()}
    result = audit.audit_task("AudioCount", 5, counts, infos, margin=5.0)
    assert result.floor == pytest.approx(1 / 3) and result.baseline == pytest.approx(1 / 3)
    assert not result.shortcut("text-only").judged
    assert not [f for f in result.failures if not f.startswith("file names")]


def _exact_tail(hits: int, n: int, p: Fraction) -> float:
    return float(sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(hits, n + 1)))


def test_binomial_tail_is_exact():
    for hits, n, p in [
        (1, 10, Fraction(1, 90)),
        (3, 5, Fraction(1, 21)),
        (15, 20, Fraction(1, 2)),
        (0, 4, 0),
    ]:
        assert audit.binomial_tail(hits, n, float(p)) == pytest.approx(_exact_tail(hits, n, p), rel=1e-9)
    # the case a Wilson bound failed: 1 of 10 against 1.1 % chance is p = 0.105, no evidence at all
    assert audit.binomial_tail(1, 10, 1 / 90) == pytest.approx(0.1058, abs=1e-4)
    assert audit.binomial_tail(0, 10, 0.3) == 1.0 and audit.binomial_tail(11, 10, 0.3) == 0.0
    assert audit.binomial_tail(1, 10, 0.0) == 0.0  # a hit where chance is nil
    assert audit.binomial_tail(300, 300, 0.5) == pytest.approx(0.5**300)
    assert audit.hits_of(1 / 3, 3) == 1 and audit.hits_of(0.49, 10) == 4  # expected hits, rounded down


def test_min_episodes_is_where_a_perfect_score_can_pass_the_correction():
    threshold = 0.05 / 300
    assert audit.min_episodes(0.5, 5.0, threshold) == 13  # 0.5^12 = 2.4e-4 > 1.7e-4 >= 0.5^13
    assert audit.least_p(12, 0.5, 5.0) > threshold >= audit.least_p(13, 0.5, 5.0)
    assert audit.min_episodes(1 / 6, 5.0, threshold) == 5
    assert audit.min_episodes(0.0, 5.0, threshold) == 1  # MorseCode: chance is nil
    assert audit.min_episodes(0.97, 5.0, threshold) is None  # a perfect score is not 5 points above 97 %
    assert audit.least_p(100, 0.97, 5.0) == 1.0


def test_tarone_k_counts_only_tests_that_can_reach_alpha_over_k():
    assert audit.tarone_k([], 0.05) == 1
    assert audit.tarone_k([0.0] * 10, 0.05) == 10
    # 10 tests that can reach any level, 90 that cannot go below 0.01: those 90 never count
    assert audit.tarone_k([0.0] * 10 + [0.01] * 90, 0.05) == 10


def row(task: str, n: int, accuracies: dict[str, float], baseline: float) -> audit.TaskAudit:
    labels = audit.LabelStats(1.0, 1.0, "x", 0.5, 2)
    none = audit.Reuse(n, n, 0, 0, 1, None)
    return audit.TaskAudit(
        task=task,
        k=1,
        episodes=n,
        chance=baseline,
        floor=baseline,
        baseline=baseline,
        floor_note="",
        labels=labels,
        queries=none,
        demos=none,
        query_in_own_demos=0,
        query_in_other_demos=0,
        demo_order=None,
        beyond_normal={},
        shortcuts=[audit.Shortcut(name, a, n, True) for name, a in accuracies.items()],
        against={name: baseline for name in accuracies},
    )


def test_judge_shortcuts_does_not_cry_wolf_on_small_noise():
    """360 tests as in a full audit: the reported false alarm (1 of 10 against 1.1 %) and a lucky 3 of 5
    pass; a row whose baseline n episodes cannot beat is too few to judge; a real cue still fails."""
    noise = [row("AudioLength", 20, {"label prior": 0.05, "recency": 0.1}, 0.05) for _ in range(178)]
    flagged = row("AudioOperatorHard", 10, {"duration": 0.1}, 1 / 90)
    lucky = row("AudioLengthHard", 5, {"text-only": 0.6}, 1 / 21)
    small = row("AnomalyDetect", 10, {"recency": 1.0, "rms": 0.8}, 0.5)
    tasks = [*noise, flagged, lucky, small]
    testing = audit.judge_shortcuts(tasks, margin=5.0)
    assert testing.judged == 360 and testing.tested == 358 and testing.too_few == 2
    assert testing.threshold == pytest.approx(0.05 / 358)
    duration = flagged.shortcuts[0]
    assert duration.status == "pass" and duration.p_value == pytest.approx(0.1058, abs=1e-4)
    assert duration.adjusted_p == 1.0 and flagged.verdict == "ok"
    assert lucky.shortcuts[0].p_value < 0.002 and lucky.verdict == "ok"  # p = 0.001, not 0.05 / 358
    assert small.verdict == "too few" and small.min_episodes == 13 and not small.failures
    assert {s.status for s in small.shortcuts} == {"too few"} and small.shortcuts[0].p_value is None
    assert not any(t.failures for t in tasks)
    # the same perfect AnomalyDetect shortcut on 20 episodes fails, and on 10 when it is tested alone
    big = row("AnomalyDetect", 20, {"recency": 1.0}, 0.5)
    audit.judge_shortcuts([*noise, flagged, lucky, big], margin=5.0)
    assert big.verdict == "FAIL" and big.failures[0].startswith("recency 100.0% > 50.0% + 5 points (p = ")
    alone = audit.judge_shortcuts([small], margin=5.0)
    assert alone.tested == 2 and small.verdict == "FAIL" and len(small.failures) == 1  # 8 of 10: p = 0.055


def test_judge_shortcuts_needs_the_margin_and_significance():
    # 54 % of 3,000 against 50 %: significant (p ~ 1e-5) but within the margin; 62 % beats both
    within = row("AnomalyDetect", 3000, {"recency": 0.54}, 0.5)
    beyond = row("AnomalyDetect", 3000, {"recency": 0.62}, 0.5)
    audit.judge_shortcuts([within, beyond], margin=5.0)
    assert within.shortcuts[0].adjusted_p < 1e-4 and within.verdict == "ok"
    assert beyond.verdict == "FAIL"
    # 62 % of 20 is noise; a margin of 100 points fails nothing and tests nothing
    noisy = row("AnomalyDetect", 20, {"recency": 0.62}, 0.5)
    audit.judge_shortcuts([noisy], margin=5.0)
    assert noisy.verdict == "ok" and noisy.shortcuts[0].p_value == pytest.approx(0.2517, abs=1e-4)
    testing = audit.judge_shortcuts([beyond], margin=100.0)
    assert testing.tested == 0 and beyond.verdict == "too few" and beyond.shortcuts[0].min_episodes is None
    # not judged and not measured shortcuts are never tested
    mixed = row("AudioLength", 300, {"duration": 1.0}, 0.05)
    mixed.shortcuts = [
        audit.Shortcut("duration", 1.0, 300, False),
        audit.Shortcut("rms", None, 0, True),
    ]
    mixed.against["rms"] = 0.05
    assert audit.judge_shortcuts([mixed], margin=5.0).judged == 0
    assert [s.status for s in mixed.shortcuts] == ["not judged", "not measured"] and mixed.verdict == "ok"
