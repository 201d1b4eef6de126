"""Paired statistics against exact values on small hand-made tables."""

from __future__ import annotations

import pytest

from audioicl import AudioICLError
from audioicl.analysis.compare import (
    MEAN_TASK,
    adjust,
    bootstrap_mean,
    compare,
    holm,
    mcnemar_exact,
    newcombe_paired,
    newcombe_unpaired,
    randomization_p,
    read_per_example,
)


def test_mcnemar_exact_is_the_two_sided_binomial_test_of_the_discordant_pairs():
    assert mcnemar_exact(0, 5) == 2 / 2**5  # 0.0625
    assert mcnemar_exact(1, 9) == 2 * (1 + 10) / 2**10  # 0.021484375
    assert mcnemar_exact(2, 8) == 2 * (1 + 10 + 45) / 2**10  # 0.109375
    assert mcnemar_exact(8, 2) == mcnemar_exact(2, 8)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0


def test_newcombe_interval_matches_the_worked_example_of_altman_et_al():
    """Statistics with confidence (2000), Table 6.2: 14 both, 5 only the first, 0 only the second, 22 neither;
    difference 5/41 = 0.122, Newcombe's 95 % interval 0.011 to 0.226."""
    low, high = newcombe_paired(14, 0, 5, 22)
    assert (low, high) == (pytest.approx(0.0115, abs=5e-4), pytest.approx(0.2265, abs=5e-4))
    flipped = newcombe_paired(14, 5, 0, 22)  # A and B swapped: the interval mirrors
    assert flipped == (pytest.approx(-high), pytest.approx(-low))
    assert newcombe_paired(0, 0, 0, 0) == (0.0, 0.0)
    low, high = newcombe_paired(10, 3, 3, 10)  # no difference: symmetric about 0
    assert low == pytest.approx(-high) and low < 0 < high


def test_holm_adjusts_in_order_and_keeps_monotone():
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([0.2, 0.9]) == pytest.approx([0.4, 0.9])
    assert holm([]) == []


def test_bootstrap_interval_and_exact_randomization_p_of_the_mean_over_tasks():
    always = {"t1": [(False, True)] * 4, "t2": [(False, True)] * 6}
    assert bootstrap_mean(always) == (1.0, 1.0)
    # unequal n: weights 1/4 and 1/6; only the two all-same sign patterns of the 2^10 reach |mean| 1
    assert randomization_p(always) == pytest.approx(2 / 2**10)
    same = {"t1": [(True, True), (False, False)]}
    assert bootstrap_mean(same) == (0.0, 0.0) and randomization_p(same) == 1.0
    mixed = {"t1": [(True, False), (False, True)] * 5, "t2": [(False, True)] * 3 + [(True, True)] * 7}
    low, high = bootstrap_mean(mixed)
    assert low < 0.15 < high and bootstrap_mean(mixed) == (low, high)  # a fixed seed
    # equal n: the exact McNemar test of the pooled discordant pairs (5 + 0 against 5 + 3)
    assert randomization_p(mixed) == pytest.approx(mcnemar_exact(5, 8))
    assert randomization_p(mixed) == pytest.approx(1 - 2 * 1716 / 2**13)  # 1 - P(sum of 13 signs = +-1)
    # unequal n, checked by enumerating all 2^5 sign patterns of the discordant episodes
    uneven = {
        "t1": [(False, True), (True, False), (True, True)],
        "t2": [(False, True), (False, True), (False, True), (True, True)],
    }
    weights = [1 / 3, 1 / 3, 1 / 4, 1 / 4, 1 / 4]
    observed = abs(1 / 3 - 1 / 3 + 3 / 4)
    patterns = [[1 - 2 * ((code >> i) & 1) for i in range(5)] for code in range(32)]
    exact = (
        sum(
            abs(sum(w * s for w, s in zip(weights, signs, strict=True))) >= observed - 1e-12
            for signs in patterns
        )
        / 32
    )
    assert randomization_p(uneven) == pytest.approx(exact)


def test_unpaired_newcombe_interval():
    low, high = newcombe_unpaired(10, 20, 15, 20)
    assert low < 0.25 < high and newcombe_unpaired(15, 20, 10, 20) == (
        pytest.approx(-high),
        pytest.approx(-low),
    )


def test_compare_pairs_episodes_by_task_and_id():
    a = {"T": {"1": True, "2": False, "3": False, "4": True, "9": True}, "U": {"1": False, "2": False}}
    b = {"T": {"1": True, "2": True, "3": True, "4": False}, "U": {"1": True, "2": True}, "V": {"1": True}}
    rows = compare(a, b, "B vs A")
    t, u, mean = rows
    assert (t.task, t.n, t.only_a, t.only_b) == ("T", 4, 1, 2)  # episode 9 is only A's: not paired
    assert (t.acc_a, t.acc_b, t.delta) == (0.5, 0.75, 0.25)
    assert t.p == mcnemar_exact(1, 2) and (t.low, t.high) == newcombe_paired(1, 1, 2, 0)
    assert (u.acc_a, u.acc_b, u.only_b) == (0.0, 1.0, 2)
    assert mean.task == MEAN_TASK and mean.acc_a == 0.25 and mean.acc_b == 0.875 and mean.only_a is None
    adjusted = adjust(rows)
    assert [r.p_adjusted for r in adjusted] == pytest.approx(holm([r.p for r in rows]))
    assert all(not r.significant for r in adjusted)  # four episodes a task decide nothing
    strong = adjust(
        compare(
            {"T": dict.fromkeys(map(str, range(30)), False)},
            {"T": dict.fromkeys(map(str, range(30)), True)},
            "x",
        )
    )
    assert strong[0].significant and strong[0].p == 2 / 2**30


def test_per_example_csv(tmp_path):
    path = tmp_path / "m_k1.csv"
    path.write_text("id,task,correct\r\nA1,AudioCount,1\r\nA2,AudioCount,0\r\n", encoding="utf-8")
    assert read_per_example(path) == {"AudioCount": {("A1", 0, 0, 0): True, ("A2", 0, 0, 0): False}}
    path.write_text("id,task\nA1,AudioCount\n", encoding="utf-8")
    with pytest.raises(AudioICLError, match="lacks column"):
        read_per_example(path)
    path.write_text("id,task,correct\nA1,AudioCount,yes\n", encoding="utf-8")
    with pytest.raises(AudioICLError) as caught:
        read_per_example(path)
    assert caught.value.line == 2
