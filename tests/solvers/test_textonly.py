"""``builtin:text-only``: each task's rule from the prompt's text, and that it never reads the audio."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from audioicl import Episode, read_meta
from audioicl.backends import ModelSpec, load_backend
from audioicl.backends.base import GenerationConfig, Request
from audioicl.prompts.build import build_chat, build_prompt
from audioicl.prompts.chat import AudioPart, Chat, PromptItem
from audioicl.prompts.clips import SilentClips
from audioicl.records import Clip, Demo, Query
from audioicl.solvers.textonly import (
    COMMON_WORDS,
    Seen,
    best_answers,
    operator_value_counts,
    text_only_answer,
    weights_for,
)
from audioicl.tasks.remap import PATTERNS


def single(task: str, labels: list[str], query: str = "0") -> Episode:
    demos = tuple(Demo((Clip(f"data/x/{task}_{i}_{label}.wav", label),)) for i, label in enumerate(labels))
    return Episode("AudioICL00001", task, demos, Query((Clip(f"data/x/{task}_q_{query}.wav", query),), query))


def best(ep: Episode) -> set[str]:
    return set(best_answers(weights_for(Seen.of(build_prompt(ep, SilentClips()).chat))))


def answers(ep: Episode, seeds=range(40)) -> set[str]:
    chat = build_prompt(ep, SilentClips()).chat
    return {text_only_answer(chat, seed) for seed in seeds}


@pytest.mark.parametrize("task", ["AudioCount", "AudioCountHard"])
def test_count_eliminates_the_counts_the_demos_show(task):
    assert best(single(task, ["1", "2", "3", "4", "5"])) == {"6", "7", "8"}
    assert answers(single(task, ["1", "2", "3", "4", "5"])) == {"6", "7", "8"}  # ties drawn, seeded
    assert best(single(task, ["8"])) == {str(v) for v in range(1, 8)}


def test_count_with_a_repeated_demo_count_is_uniform():
    assert best(single("AudioCount", ["2", "2", "5"])) == {str(v) for v in range(1, 9)}


def test_operator_hypotheses_from_demo_values():
    # 81 only comes from 9 × 9: the operator is ×, and the answer a most common product but 81
    mul = operator_value_counts("AudioOperator")[("mul",)]
    top = max(mul.values())
    assert best(single("AudioOperator", ["81"])) == {str(v) for v, n in mul.items() if n == top}
    assert best(single("AudioOperator", ["81"])) == {"6", "8", "12", "18", "24"}
    # 0 only comes from −: a − b is 0 nine times (a = b) and 1 eight times; one 0 is used up
    assert best(single("AudioOperator", ["0"])) == {"0", "1"}
    # 17 comes from 8 + 9 and 9 + 8, never from − or ×: + it is, and 10 is its most common sum
    assert best(single("AudioOperator", ["17"])) == {"10"}


def test_operator_values_no_hypothesis_explains_fall_back_to_the_recipe_prior():
    weights = weights_for(Seen.of(build_prompt(single("AudioOperatorHard", ["100000"]), SilentClips()).chat))
    assert weights and all(w > 0 for w in weights.values())
    hard = operator_value_counts("AudioOperatorHard")
    assert set(hard) == {("mul", "add"), ("mul", "sub")}
    assert min(min(c) for c in hard.values()) == 0  # values are never negative


def test_length_answers_the_most_frequent_demo_label():
    assert best(single("AudioLength", ["7", "3", "7"])) == {"7"}
    assert best(single("AudioLengthHard", [])) == {str(v) for v in range(0, 21)}


def remap_episode(a: str = "Q", b: str = "Z") -> Episode:
    demo = Demo((Clip("d/a.wav", "E", "A"), Clip("d/b.wav", "G", "B"), Clip("d/m.wav", "EGE", "MIX")), True)
    query = Query(
        (Clip("q/a.wav", a, "A"), Clip("q/b.wav", b, "B"), Clip("q/m.wav", None, "MIX")), "QZQ", True
    )
    return Episode("AudioICL02101", "AudioRemap", (demo,), query)


def test_remap_spells_a_pattern_with_the_query_letters():
    spelled = {p.replace("A", "Q").replace("B", "Z") for p in PATTERNS}
    assert best(remap_episode()) == spelled
    assert answers(remap_episode(), range(200)) == spelled


def test_anomaly_is_a_fair_coin_whatever_the_demo_order():
    pair = Demo((Clip("n.wav", "Normal", "Normal"), Clip("a.wav", "Anomalous", "Anomalous")), True)
    query = Query((Clip("q.wav", None, "Query"),), "Anomalous", True)
    ep = Episode("AudioICL02401", "AnomalyDetect", (pair, pair), query, {"object": "fan"})
    assert best(ep) == {"Normal", "Anomalous"}  # no weight on the label shown last


def test_morse_answers_a_common_word_no_demo_has():
    assert best(single("MorseCode", ["about", "their"], "plant")) == {"there"}
    assert best(single("MorseCode", [], "plant")) == {COMMON_WORDS[0]}


def test_unknown_task_answers_the_majority_demo_label():
    assert best(single("SomethingElse", ["x", "y", "y"])) == {"y"}


def _swap_audio(chat: Chat, seed: int) -> Chat:
    rng = np.random.default_rng(seed)

    def other(item: PromptItem) -> PromptItem:
        wave = rng.standard_normal(800).astype(np.float32)
        return replace(item, audio=AudioPart.of(wave, 16000))

    return replace(chat, items=tuple(other(item) for item in chat.items))


def test_answers_do_not_depend_on_audio(tiny_dataset: Path):
    """The same text with other waves gets the same answer: nothing but what the items say (labels, tags,
    roles) reaches the rule or the tie-break."""
    for episode in read_meta(tiny_dataset / "meta" / "meta_k3.jsonl"):
        chat = build_chat(episode, tiny_dataset)
        assert chat.items[-1].label is None  # the query target carries no label
        for seed in range(3):
            assert text_only_answer(_swap_audio(chat, seed), 7) == text_only_answer(chat, 7)
        assert text_only_answer(build_prompt(episode, SilentClips()).chat, 7) == text_only_answer(chat, 7)


def test_backend_answers_each_chat_the_same_whatever_the_batch(tiny_dataset: Path):
    chats = [build_chat(ep, tiny_dataset) for ep in read_meta(tiny_dataset / "meta" / "meta_k2.jsonl")]
    requests = [Request(f"e{i}@k2", f"e{i}", chat.task, 2, chat) for i, chat in enumerate(chats)]
    backend = load_backend(ModelSpec("builtin", "text-only"), seed=3)
    forward = [r.text for r in backend.generate(requests, GenerationConfig())]
    backward = [r.text for r in backend.generate(requests[::-1], GenerationConfig())][::-1]
    assert forward == backward and backend.name == "builtin:text-only"
    assert forward == [text_only_answer(chat, 3) for chat in chats]
