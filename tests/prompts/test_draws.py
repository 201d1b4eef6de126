"""Demonstration draws, demo orders and instruction variants (``prompts.draws``, ``run --draws/--orders/
--prompt-variants``): the draws themselves, their lines in the results log, resume, shards and merge."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import make_dataset
from helpers import quiet

from audioicl import AudioICLError, read_meta
from audioicl.inference.options import RunOptions, Shard
from audioicl.inference.results import LineKey, ResultsLog, drop_error_lines, iter_results, merge_shards
from audioicl.inference.runner import preflight, run
from audioicl.prompts.build import build_prompt
from audioicl.prompts.chat import TextPart
from audioicl.prompts.clips import ClipStore
from audioicl.prompts.draws import Variation, Variations, demo_pool, drawn_demos, ordered_demos, present
from audioicl.prompts.sets import PromptSet, load_prompt_set, prompt_variants, variant_files
from audioicl.tasks import TASKS

KS = (1, 2, 3, 5)
SECONDS = re.compile(rb'"seconds": [0-9.e+-]+')


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """The tiny dataset with k = 1, 2, 3 and 5 (the pool: the 5 demos of each episode)."""
    return make_dataset(tmp_path_factory.mktemp("draws_dataset"), ks=KS)


def episodes_at(dataset: Path, k: int):
    return {ep.id: ep for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl")}


def untimed(path: Path) -> bytes:
    """A results file's bytes with each line's wall time zeroed (nothing else differs between two runs)."""
    return SECONDS.sub(b'"seconds": 0', path.read_bytes())


def lines(path: Path) -> list[dict]:
    return [{**line.data, "seconds": 0} for line in iter_results(path)]


def by_key(path: Path) -> dict[LineKey, dict]:
    return {line.key: {**line.data, "seconds": 0} for line in iter_results(path)}


# --------------------------------------------------------------------------- the draws


def test_draw_zero_is_the_file_and_draws_are_nested_across_k(dataset):
    largest = episodes_at(dataset, 5)
    files = {k: episodes_at(dataset, k) for k in KS}
    changed = 0
    for episode_id, full in largest.items():
        for draw in range(4):
            shown = {}
            for k in KS:
                ep = files[k][episode_id]
                pool = demo_pool(ep, full)
                assert pool == full.demos  # the fixture is nested: every k draws from the 5 demos
                shown[k] = drawn_demos(ep, pool, 0, draw)
                if draw == 0:
                    assert shown[k] == ep.demos
            for small, large in itertools.pairwise(KS):
                assert shown[large][:small] == shown[small]  # draw j at k is a prefix of draw j at larger k
            assert sorted(map(repr, shown[5])) == sorted(map(repr, full.demos))  # k = k_max: a re-ordering
            changed += shown[2] != files[2][episode_id].demos
    assert changed  # re-draws show other demos at k < k_max


def test_draws_and_orders_are_seeded_by_episode_and_number_only(dataset):
    full = episodes_at(dataset, 5)
    ep = episodes_at(dataset, 3)["AudioICL00001"]
    pool = full[ep.id].demos
    first = [present(ep, pool, 0, Variation(draw, order)) for draw in range(3) for order in range(3)]
    again = [present(ep, pool, 0, Variation(draw, order)) for draw in range(3) for order in range(3)]
    assert first == again
    assert present(ep, pool, 0, Variation()) is ep
    other_seed = [present(ep, pool, 1, Variation(draw, order)) for draw in range(3) for order in range(3)]
    assert other_seed != first
    for draw in range(3):
        demos = drawn_demos(ep, pool, 0, draw)
        for order in range(3):
            shown = present(ep, pool, 0, Variation(draw, order, variant=2))
            assert shown.query == ep.query and shown.id == ep.id
            assert sorted(map(repr, shown.demos)) == sorted(map(repr, demos))  # an order only re-orders
            assert shown.demos == ordered_demos(demos, 0, ep.id, draw, order)
    assert ordered_demos(ep.demos, 0, ep.id, 0, 0) == ep.demos


def test_a_redraw_keeps_the_tasks_label_rules(dataset):
    """Demos are drawn whole from the episode's own pool: AudioCount's counts stay distinct and never the
    query's, AudioRemap's patterns distinct, AnomalyDetect's demos Normal/Anomalous pairs with their roles."""
    full = episodes_at(dataset, 5)
    for ep in episodes_at(dataset, 3).values():
        pool = full[ep.id].demos
        for draw in range(1, 6):
            shown = present(ep, pool, 0, Variation(draw, 1))
            assert all(demo in pool for demo in shown.demos)
            labels = [demo.label for demo in shown.demos]
            if ep.task in ("AudioCount", "AudioRemap"):
                assert len(set(labels)) == len(labels)
            if ep.task == "AudioCount":
                assert ep.query.label not in labels
            if ep.task == "AnomalyDetect":
                assert all({c.role for c in demo.clips} == {"Normal", "Anomalous"} for demo in shown.demos)


def test_a_record_that_is_not_nested_has_no_pool(dataset):
    full = episodes_at(dataset, 5)["AudioICL00001"]
    ep = episodes_at(dataset, 2)["AudioICL00001"]
    assert demo_pool(ep, None) is None
    assert demo_pool(replace(ep, demos=ep.demos[::-1]), full) is None
    assert demo_pool(ep.with_shots(0), full) == full.demos


def test_variations_and_their_keys():
    assert list(Variations()) == [Variation()]
    assert Variations().fields == () and not Variations().varied
    grid = Variations(draws=2, orders=1, variants=3)
    assert grid.fields == ("draw", "variant")
    assert list(grid) == [Variation(d, 0, v) for d in range(2) for v in range(3)]
    assert Variation().key_suffix == ""
    assert Variation(2, 0, 1).key_suffix == "/d2/v1"
    assert Variation(0, 3, 0).key_suffix == "/o3"
    assert str(LineKey("a")) == "a"
    assert str(LineKey("a", Variation(1, 0, 2))) == "a (draw 1, order 0, variant 2)"


# --------------------------------------------------------------------------- instruction variants


def test_shipped_variants_cover_every_task_and_keep_the_answer_format():
    files = variant_files()
    assert len(files) >= 2  # with variant 0: at least 3 per task
    base = PromptSet()
    seen = {name: {base.instruction(name, "specific")} for name in TASKS.names()}
    general = {base.general}
    for path in files:
        variant = load_prompt_set(path)
        assert set(variant.instructions) == set(TASKS.names())
        general.add(variant.general)
        assert variant.general.endswith("Answer with a single integer only.")
        for name in TASKS.names():
            original = TASKS.get(name).instruction
            answer = original[original.rindex("Answer with") :]
            text = variant.instructions[name]
            assert text.endswith(answer) and text.count("Answer with") == 1, (path.name, name)
            seen[name].add(text)
    assert all(len(texts) == len(files) + 1 for texts in seen.values())  # every variant its own wording
    assert len(general) == len(files) + 1
    with pytest.raises(AudioICLError, match=f"--prompt-variants must be 1 to {len(files) + 1}"):
        prompt_variants(base, len(files) + 2)


def _shown(parts) -> list[str]:
    """A message's parts as text: each text, and each clip by its content digest."""
    return [part.text if isinstance(part, TextPart) else part.digest for part in parts]


@pytest.mark.parametrize("style", ["specific", "general"])
def test_a_variant_changes_the_instruction_text_only(dataset, style):
    custom = PromptSet(system={**PromptSet().system, "default": "Be brief."})
    sets = prompt_variants(custom, len(variant_files()) + 1)
    assert sets[0] is custom
    clips = ClipStore(dataset)
    for ep in episodes_at(dataset, 3).values():
        chats = [build_prompt(ep, clips, style=style, prompt_set=variant).chat for variant in sets]
        instructions = [chat.frame.instruction for chat in chats]
        assert len(set(instructions)) == len(sets)
        for chat, instruction in zip(chats, instructions, strict=True):
            assert chat.items == chats[0].items
            assert chat.messages[0] == chats[0].messages[0]  # the system prompt is the run's
            assert chat.messages[0].content[0].text == "Be brief."
            (user,), (first_user,) = chat.messages[1:], chats[0].messages[1:]
            text, *rest = _shown(user.content)
            first_text, *first_rest = _shown(first_user.content)
            assert text.startswith(instruction + "\n\n")
            assert text[len(instruction) :] == first_text[len(instructions[0]) :]
            assert rest == first_rest


# --------------------------------------------------------------------------- runs


def options(dataset: Path, out: Path, **changes) -> RunOptions:
    return RunOptions(data=dataset, model="builtin:icl", out=out, **changes)


def test_a_default_run_is_byte_identical_with_draws_orders_and_variants_of_one(dataset, tmp_path):
    run(options(dataset, tmp_path / "plain", batch_size=3), quiet)
    run(options(dataset, tmp_path / "ones", batch_size=3, draws=1, orders=1, prompt_variants=1), quiet)
    for k in KS:
        name = f"icl_results_k{k}.jsonl"
        assert untimed(tmp_path / "plain" / name) == untimed(tmp_path / "ones" / name)
    record = json.loads((tmp_path / "ones" / "icl_run.json").read_text())
    assert "variations" not in record["runs"][0]


def test_each_presentation_is_its_own_line_with_its_fields_and_a_unique_key(dataset, tmp_path):
    asked = options(dataset, tmp_path / "out", shots=(2, 5), draws=3, prompt_variants=2)
    plan = preflight(asked, quiet)
    keys = [item.key for items in plan.work.values() for item in items]
    assert len(keys) == len(set(keys)) == 2 * 12 * 3 * 2
    assert "AudioICL00001@k2" in keys and "AudioICL00001@k2/d2/v1" in keys
    run(asked, quiet)
    for k in (2, 5):
        written = lines(tmp_path / "out" / f"icl_results_k{k}.jsonl")
        assert len(written) == 12 * 3 * 2
        assert all("order" not in line and {"draw", "variant"} <= line.keys() for line in written)
        assert Counter((line["draw"], line["variant"]) for line in written) == {
            (d, v): 12 for d in range(3) for v in range(2)
        }
        files = episodes_at(dataset, k)
        for line in written:
            ep = files[line["id"]]
            clips = [c.audio_path for c in ep.clips()]
            if line["draw"] == 0:
                assert line["audio_paths"][-len(clips) :] == clips  # draw 0 shows the file's demos
            assert line["gt"] == ep.query.label and line["audio_paths"][-1] == clips[-1]
    record = json.loads((tmp_path / "out" / "icl_run.json").read_text())
    variations = record["runs"][0]["variations"]
    assert variations["draws"] == 3 and variations["orders"] == 1 and variations["prompt_variants"] == 2
    assert variations["pool"]["file"] == "meta_k5.jsonl"
    assert variations["seeds"]["draw"] == ["seed", "demo-draw", "<id>", "<draw>"]
    assert set(variations["variant_files"]) == {"1"}


def test_icl_answers_change_across_draws_and_a_demo_ignoring_solver_does_not(dataset, tmp_path):
    """``builtin:icl`` induces the rule from the demos shown, so some draw answers otherwise; the oracle of
    AudioCount, MorseCode and AudioRemap applies the true rule to the query alone."""
    common = {"shots": (1, 2), "draws": 4, "orders": 2}
    run(options(dataset, tmp_path / "icl", **common), quiet)
    oracle = replace(options(dataset, tmp_path / "oracle", **common), model="builtin:oracle")
    run(replace(oracle, tasks=("AudioCount", "MorseCode", "AudioRemap")), quiet)
    for k in (1, 2):
        answers = {"icl": {}, "oracle": {}}
        for model in answers:
            for line in lines(tmp_path / model / f"{model}_results_k{k}.jsonl"):
                answers[model].setdefault(line["id"], {})[line["draw"], line["order"]] = line["response"]
        assert any(len(set(per.values())) > 1 for per in answers["icl"].values())
        assert answers["oracle"] and all(len(set(per.values())) == 1 for per in answers["oracle"].values())


def test_a_later_run_with_more_draws_adds_only_the_new_ones(dataset, tmp_path):
    out = tmp_path / "out"
    run(options(dataset, out, shots=(2,)), quiet)
    plain = (out / "icl_results_k2.jsonl").read_bytes()
    summary = run(options(dataset, out, shots=(2,), draws=3), quiet)
    assert (summary.ks[0].written, summary.ks[0].skipped) == (24, 12)
    data = (out / "icl_results_k2.jsonl").read_bytes()
    kept = set(plain.splitlines(keepends=True))
    assert kept <= set(data.splitlines(keepends=True))  # the plain lines are draw 0, kept as they were
    added = [json.loads(text) for text in data.splitlines(keepends=True) if text not in kept]
    assert sorted({line["draw"] for line in added}) == [1, 2]
    assert [json.loads(text)["id"] for text in data.splitlines()] == sorted(  # each episode's draws together,
        json.loads(text)["id"]
        for text in data.splitlines()  # in the meta order (issue 40, item 7)
    )
    again = run(options(dataset, out, shots=(2,), draws=3), quiet)
    assert (again.ks[0].written, again.ks[0].skipped) == (0, 36)
    fresh = tmp_path / "fresh"
    run(options(dataset, fresh, shots=(2,), draws=3), quiet)
    assert by_key(out / "icl_results_k2.jsonl") == {
        key: line if key.variation.draw else {k: v for k, v in line.items() if k != "draw"}
        for key, line in by_key(fresh / "icl_results_k2.jsonl").items()
    }
    record = json.loads((out / "icl_run.json").read_text())
    assert ["variations" in entry for entry in record["runs"]] == [False, True, True]


def test_draws_do_not_depend_on_batches_windows_order_or_shards(dataset, tmp_path):
    common = {"shots": (1, 3), "draws": 3, "orders": 2, "prompt_variants": 2}
    run(options(dataset, tmp_path / "one", **common), quiet)
    reference = {k: by_key(tmp_path / "one" / f"icl_results_k{k}.jsonl") for k in (1, 3)}
    run(options(dataset, tmp_path / "other", batch_size=1, window=1, order="k", **common), quiet)
    shards = []
    for index in (1, 2):
        run(options(dataset, tmp_path / "sharded", shard=Shard(index, 2), **common), quiet)
        shards.append(tmp_path / "sharded" / f"shard-{index}-of-2")
    merge_shards(shards, tmp_path / "merged", dataset)
    for k in (1, 3):
        name = f"icl_results_k{k}.jsonl"
        assert by_key(tmp_path / "other" / name) == reference[k]
        assert by_key(tmp_path / "merged" / name) == reference[k]
        merged = [line.key for line in iter_results(tmp_path / "merged" / name)]
        episodes = list(episodes_at(dataset, k))
        assert merged == [LineKey(i, v) for i in episodes for v in Variations(3, 2, 2)]  # dataset order


def test_merge_refuses_a_presentation_given_twice_or_missing(dataset, tmp_path):
    shards = []
    for index in (1, 2):
        run(options(dataset, tmp_path / "s", shots=(1,), draws=2, shard=Shard(index, 2)), quiet)
        shards.append(tmp_path / "s" / f"shard-{index}-of-2")
    path = shards[0] / "icl_results_k1.jsonl"
    text = path.read_text(encoding="utf-8").splitlines(keepends=True)
    drawn = next(i for i, line in enumerate(text) if json.loads(line)["draw"] == 1)
    path.write_text("".join(text + [text[drawn]]), encoding="utf-8")
    with pytest.raises(AudioICLError, match=r"id in draw 1, order 0, variant 0 given twice"):
        merge_shards(shards, tmp_path / "m1")
    path.write_text("".join(text[:drawn] + text[drawn + 1 :]), encoding="utf-8")
    with pytest.raises(AudioICLError, match=r"1 \(episode, presentation\)s of the dataset have no result"):
        merge_shards(shards, tmp_path / "m2", dataset)


def test_the_log_keys_lines_by_id_and_presentation(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(
        '{"id": "a"}\n{"id": "a", "draw": 1}\n{"id": "a", "draw": 0, "order": 0}\n', encoding="utf-8"
    )
    with pytest.raises(AudioICLError, match=r"id appears twice \(first on line 1\)") as info:
        ResultsLog.open(path)
    assert (info.value.line, info.value.id) == (3, "a")
    path.write_text('{"id": "a"}\n{"id": "a", "draw": 1, "variant": 2}\n', encoding="utf-8")
    log = ResultsLog.open(path)
    assert log.done_keys() == {LineKey("a"), LineKey("a", Variation(1, 0, 2))}
    assert log.done_ids() == {"a"}
    for bad in ('"draw": -1', '"order": "1"', '"variant": true', '"draw": 1.0'):
        path.write_text(f'{{"id": "a"}}\n{{"id": "b", {bad}}}\n', encoding="utf-8")
        with pytest.raises(AudioICLError, match="must be a non-negative integer") as info:
            ResultsLog.open(path)
        assert (info.value.line, info.value.id) == (2, "b")


def test_retrying_errors_drops_only_the_presentations_asked_for(tmp_path):
    path = tmp_path / "r.jsonl"
    kept = ['{"id": "a", "status": "error"}\n', '{"id": "a", "draw": 2, "status": "error"}\n']
    path.write_text(
        "".join(
            [*kept, '{"id": "a", "draw": 1, "status": "error"}\n', '{"id": "a", "draw": 1, "order": 1}\n']
        ),
        encoding="utf-8",
    )
    assert drop_error_lines(path, {"a"}, {Variation(1), Variation(1, 1)}) == 1
    assert path.read_text(encoding="utf-8") == "".join([*kept, '{"id": "a", "draw": 1, "order": 1}\n'])


def test_options_that_cannot_vary_are_refused(dataset, tmp_path):
    with pytest.raises(AudioICLError, match="--draws must be at least 1"):
        preflight(options(dataset, tmp_path, draws=0), quiet)
    with pytest.raises(AudioICLError, match="--orders must be at least 1"):
        preflight(options(dataset, tmp_path, orders=0), quiet)
    with pytest.raises(AudioICLError, match="--style none shows no instruction"):
        preflight(options(dataset, tmp_path, style="none", prompt_variants=2), quiet)
    with pytest.raises(AudioICLError, match="--probe asks each query zero-shot"):
        preflight(options(dataset, tmp_path, probe=True, draws=2), quiet)
    with pytest.raises(AudioICLError, match="--prompt-variants must be 1 to"):
        preflight(options(dataset, tmp_path, prompt_variants=99), quiet)


def test_records_that_are_not_nested_draw_from_their_own_demos(tmp_path):
    root = make_dataset(tmp_path / "ds", per_task=1, ks=(2, 3))
    meta = root / "meta" / "meta_k2.jsonl"
    records = [json.loads(line) for line in meta.read_text(encoding="utf-8").splitlines()]
    records[0]["demos"] = records[0]["demos"][::-1]
    meta.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    messages: list[str] = []
    plan = preflight(options(root, tmp_path / "out", shots=(2,), draws=4), messages.append)
    assert any(
        "k=2: 1 episode(s) are not the first 2 demos of their record in meta_k3.jsonl" in m for m in messages
    )
    own = sorted(map(repr, read_meta(meta)[0].demos))
    drawn = [item.episode for item in plan.work[2] if item.episode.id == records[0]["id"]]
    assert len(drawn) == 4 and all(sorted(map(repr, ep.demos)) == own for ep in drawn)
