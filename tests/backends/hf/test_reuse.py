"""The ``hf`` backend's reuse path (``backends/reuse.py``): packing an episode's k prompts into one row, the
row's attention mask and positions, and answers identical to transformers' ``generate`` from scratch on tiny
fp32 models of every family, for every task and k."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from helpers import noise_clip, share_features  # noqa: E402

from audioicl import AudioICLError, Episode, ModelSpec, load_backend  # noqa: E402
from audioicl.backends.base import GenerationConfig  # noqa: E402
from audioicl.backends.hf import KIND as HF  # noqa: E402
from audioicl.backends.hf.backend import HFBackend  # noqa: E402
from audioicl.backends.hf.features import feature_batch  # noqa: E402
from audioicl.backends.hf.load import reuse_for  # noqa: E402
from audioicl.backends.hf.reuse.attention import PrefillShape, prefill_attention, prefill_shape  # noqa: E402
from audioicl.backends.hf.reuse.plan import decode_groups, joined  # noqa: E402
from audioicl.backends.hf.reuse.rows import (  # noqa: E402
    ClipSpan,
    TokenSequence,
    batches,
    layout,
    pack,
    pack_rows,
    shared_prefix,
    token_sequence,
)
from audioicl.inference.runner import Work, windows  # noqa: E402
from audioicl.records import Query  # noqa: E402
from audioicl.testing.requests import episode_major_requests  # noqa: E402

FAMILY_NAMES = ("qwen2-audio", "qwen2.5-omni", "qwen3-omni")
AUDIO = 99


def sequence(index: int, group: str, ids: list[int], clips: list[tuple[str, int]] = ()) -> TokenSequence:
    return token_sequence(index, group, ids, AUDIO, clips)


# --------------------------------------------------------------------------- packing, masks, positions


def test_a_sequence_matches_its_audio_tokens_to_its_clips_in_order():
    seq = sequence(0, "e", [1, AUDIO, AUDIO, 2, AUDIO, 3], [("a", 2), ("b", 1)])
    assert seq.clips == (ClipSpan("a", 1, 2), ClipSpan("b", 4, 1)) and seq.audio_tokens == 3
    with pytest.raises(ValueError, match="do not match"):
        sequence(0, "e", [1, AUDIO, 2], [("a", 2)])
    with pytest.raises(ValueError, match="more audio tokens"):
        sequence(0, "e", [1, AUDIO, AUDIO], [("a", 1)])


def test_the_shared_prefix_stops_at_the_first_other_token_or_other_clip():
    a = sequence(0, "e", [1, 2, AUDIO, AUDIO, 5, 6], [("x", 2)])
    assert shared_prefix(a, sequence(1, "e", [1, 2, AUDIO, AUDIO, 5, 7], [("x", 2)])) == 5
    # the same tokens, but another clip: nothing from that clip on is shared
    assert shared_prefix(a, sequence(2, "e", [1, 2, AUDIO, AUDIO, 5, 6], [("y", 2)])) == 2
    assert shared_prefix(a, sequence(3, "e", [9, 2], [])) == 0


def test_an_episodes_prompts_share_one_row_and_keep_a_token_of_their_own():
    k2 = sequence(0, "ep1", [1, 2, 3, 4, 5, 6])
    k1 = sequence(1, "ep1", [1, 2, 3, 7])
    same = sequence(2, "ep1", [1, 2, 3, 4])  # a prefix of the trunk: its last token is still its own
    other = sequence(3, "ep2", [1, 2, 3])
    rows = pack([k1, k2, same, other], share=True)
    assert len(rows) == 2
    members = rows[0].members
    assert [m.sequence.index for m in members] == [0, 1, 2]
    assert [(m.shared, m.start, m.own) for m in members] == [(0, 0, 6), (3, 6, 1), (3, 7, 1)]
    assert rows[0].length == 8 and rows[1].length == 3
    assert [len(r.members) for r in pack([k1, k2, same, other], share=False)] == [1, 1, 1, 1]


def test_batches_hold_whole_rows_longest_first():
    rows = pack([sequence(i, f"ep{i // 2}", [1] * (i + 2)) for i in range(6)], share=True)
    grouped = batches(rows, prompts=3)
    assert [[len(r.members) for r in b] for b in grouped] == [[2, 2], [2]]
    assert [r.length for b in grouped for r in b] == sorted((r.length for r in rows), reverse=True)


def test_each_prompt_in_a_row_sees_its_shared_prefix_and_itself_only():
    trunk = sequence(0, "e", [1, 2, 3, 4, 5])
    short = sequence(1, "e", [1, 2, 9])  # shares [1, 2]
    plan = layout(pack([trunk, short], share=True), steps=2, pad_id=0, device=torch.device("cpu"), align=4)
    assert plan.prefill == 6 and plan.width == 2 and plan.total == 12  # 6 + 2 steps x 2 members, aligned
    assert plan.ids[0].tolist() == [1, 2, 3, 4, 5, 9]
    # positions: the trunk 0..4, the short prompt's own token at 2, then each member's generated tokens
    assert plan.positions[0].tolist() == [0, 1, 2, 3, 4, 2, 5, 3, 6, 4, 0, 0]
    seen = plan.visible(slice(0, plan.total))[0]
    assert seen[5].nonzero().flatten().tolist() == [0, 1, 5]  # the short prompt's token: prefix + itself
    assert seen[4].nonzero().flatten().tolist() == [0, 1, 2, 3, 4]  # the trunk: causal over itself
    assert seen[7].nonzero().flatten().tolist() == [0, 1, 5, 7]  # short's first generated token read back
    assert seen[8].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 6, 8]  # trunk's second one
    assert seen[10].nonzero().flatten().tolist() == [10]  # an unused slot sees only itself


def visible_by_definition(plan, row: int, query: int) -> list[int]:
    """The keys ``query`` of ``row`` sees, by ``Layout.visible``'s docstring, one key at a time."""
    member = int(plan.owner[row, query])
    if member < 0:
        return [query]
    trunk = range(int(plan.trunk_at[row, member]), int(plan.trunk_at[row, member] + plan.limit[row, member]))
    return [
        key
        for key in range(plan.total)
        if (int(plan.owner[row, key]) == member and key <= query) or key in trunk or key == query
    ]


@pytest.mark.parametrize("packed", [False, True])
def test_what_a_position_sees_is_what_the_definition_says_for_any_span_of_queries_and_rows(packed):
    """``Layout.visible`` (built in a few passes over the whole mask) against its definition taken key by key,
    on rows of several groups that branch at different points, with padding and the decode's slots, for spans
    that start mid-prompt and slices of the rows."""
    generator = torch.Generator().manual_seed(7)
    prompts = []
    for group in range(5):
        trunk = torch.randint(
            1, 50, (int(torch.randint(4, 14, (1,), generator=generator)),), generator=generator
        )
        for index in range(int(torch.randint(1, 4, (1,), generator=generator))):
            cut = int(torch.randint(0, len(trunk) + 1, (1,), generator=generator))
            tail = [60 + index] * int(torch.randint(0, 3, (1,), generator=generator))
            prompts.append(sequence(len(prompts), f"g{group}", [*trunk[:cut].tolist(), *tail] or [1]))
    rows = pack(prompts, share=True)
    plan = layout(pack_rows(rows) if packed else rows, steps=2, pad_id=0, device=torch.device("cpu"), align=4)
    for queries, selected in [(slice(0, plan.total), slice(None)), (slice(3, plan.prefill), slice(1, 3))]:
        seen = plan.visible(queries, selected)
        for at, row in enumerate(range(plan.owner.shape[0])[selected]):
            for offset, query in enumerate(range(plan.total)[queries]):
                assert seen[at, offset].nonzero().flatten().tolist() == visible_by_definition(
                    plan, row, query
                )


def test_packed_rows_hold_a_batchs_groups_one_after_another_each_reading_only_its_own_trunk():
    long = [sequence(0, "a", [1, 2, 3, 4, 5, 6, 7, 8]), sequence(1, "a", [1, 2, 3, 9])]
    small = [sequence(2, "b", [1, 2, 5]), sequence(3, "b", [1, 2, 6])]  # shares [1, 2]
    tiny = [sequence(4, "c", [7, 8])]
    rows = pack([*long, *small, *tiny], share=True)
    assert [r.length for r in rows] == [9, 4, 2]
    packed = pack_rows(rows)
    assert [r.length for r in packed] == [9, 6]  # none longer than the longest; first fit, longest first
    assert [[m.sequence.index for m in r.members] for r in packed] == [[0, 1], [2, 3, 4]]
    assert [(m.start, m.shared, m.trunk_at) for m in packed[1].members] == [(0, 0, 0), (3, 2, 0), (4, 0, 4)]
    plan = layout(packed, steps=1, pad_id=0, device=torch.device("cpu"), align=1)
    assert plan.ids[1].tolist() == [1, 2, 5, 6, 7, 8, 0, 0, 0]
    assert plan.positions[1, :6].tolist() == [0, 1, 2, 2, 0, 1]  # each prompt counts its own positions
    seen = plan.visible(slice(0, plan.prefill))[1]
    assert seen[3].nonzero().flatten().tolist() == [0, 1, 3]  # b's second prompt: its prefix and itself
    assert seen[5].nonzero().flatten().tolist() == [4, 5]  # c: only itself, not b before it
    assert seen[4].nonzero().flatten().tolist() == [4]
    assert batches(rows, prompts=8, packed=True) == [packed]


def test_a_prefills_causal_head_is_what_every_row_reads_causally_and_no_query_reads_past_the_read():
    """The trunks' positions every row shares read causally (the causal kernel); the first branch, padding or
    packed trunk ends it; keys stop at the read's last position (the decode's slots are never read)."""
    rows = pack(
        [
            sequence(0, "a", [1, 2, 3, 4, 5, 6, 7, 8]),
            sequence(1, "a", [1, 2, 3, 9]),  # a's branch from position 8
            sequence(2, "b", [1, 2, 5, 6, 7]),
            sequence(3, "b", [1, 2, 9]),  # b's branch from position 5
        ],
        share=True,
    )
    plan = layout(rows, steps=3, pad_id=0, device=torch.device("cpu"), align=1)
    assert plan.total == plan.prefill + 3 * 2  # the decode's slots after the read
    assert prefill_shape(plan.visible(slice(0, plan.prefill)), slice(0, plan.prefill)) == PrefillShape(5, 9)
    assert prefill_shape(plan.visible(slice(2, 9)), slice(2, 9)) == PrefillShape(
        3, 9
    )  # after a common prefix
    packed = layout(pack_rows(rows), steps=1, pad_id=0, device=torch.device("cpu"), align=1)
    assert prefill_shape(packed.visible(slice(0, 6)), slice(0, 6)).causal == 5


@pytest.mark.parametrize(("start", "groups"), [(0, 1), (3, 1), (3, 2)])
def test_prefill_attention_is_sdpa_under_the_whole_mask(start, groups):
    """A read's span from ``start`` (a common prefix in the cache before it) over a cache with the decode's
    slots after it, with grouped queries: the same output as sdpa over every key under the additive mask."""
    from audioicl.backends.hf.reuse.rows import additive_mask

    rows = pack(
        [sequence(0, "a", list(range(1, 81))), sequence(1, "a", [*range(1, 41), 7, 7, 7])]
        + [sequence(2, "b", list(range(1, 71))), sequence(3, "b", [*range(1, 51), 8])],
        share=True,
    )
    plan = layout(rows, steps=4, pad_id=0, device=torch.device("cpu"), align=8)
    span = slice(start, plan.prefill)
    visible = plan.visible(span)
    mask = additive_mask(visible, torch.float32)
    shape = prefill_shape(visible, span)
    assert 0 < shape.causal < span.stop - span.start and shape.keys == plan.prefill < plan.total
    heads, dim = 4, 16
    generator = torch.Generator().manual_seed(start + groups)
    query = torch.randn(len(rows), heads, span.stop - span.start, dim, generator=generator)
    key, value = (torch.randn(len(rows), heads // groups, plan.total, dim, generator=generator) for _ in "kv")
    module = torch.nn.Module()
    module.num_key_value_groups = groups
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1), attn_mask=mask
    ).transpose(1, 2)
    made = prefill_attention(module, query, key, value, mask, shape, None)
    assert made.shape == expected.shape and made.is_contiguous()
    torch.testing.assert_close(made, expected, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- options


def test_reuse_options_are_checked_against_the_family():
    from audioicl.backends.families import FAMILIES

    qwen, plain = FAMILIES.get("qwen2-audio"), FAMILIES.get("glmasr")  # glmasr: no fast path
    assert HF.parse({}).reuse is None
    with pytest.raises(AudioICLError, match="reuse must be off, audio or prefix"):
        HF.parse({"reuse": "all"})
    with pytest.raises(AudioICLError, match="needs attn=sdpa or eager"):
        reuse_for(HF.parse({"reuse": "prefix", "attn": "flash_attention_2"}), qwen)
    with pytest.raises(AudioICLError, match="cache applies to transformers' generate"):
        reuse_for(HF.parse({"cache": "static"}), qwen)
    # a family whose default is already reuse=off takes cache=static as it stands
    assert reuse_for(HF.parse({"cache": "static"}), plain) == "off"
    assert HF.parse({"pack": "on"}).pack == "on" and HF.parse({}).pack == "off"
    with pytest.raises(AudioICLError, match="pack must be on or off"):
        HF.parse({"pack": "yes"})
    with pytest.raises(AudioICLError, match="pack=on packs the rows of the fast path"):
        reuse_for(HF.parse({"pack": "on", "reuse": "off"}), qwen)
    with pytest.raises(AudioICLError, match="glmasr has no fast path"):
        reuse_for(HF.parse({"pack": "on"}), plain)
    assert reuse_for(HF.parse({"cache": "static", "reuse": "off"}), qwen) == "off"
    assert HF.parse({}).decode_batches == "auto"
    assert HF.parse({"decode_batches": "3"}).decode_batches == 3
    for wrong in ("0", "two", "-1", "1.5"):
        with pytest.raises(AudioICLError, match="decode_batches must be auto or a whole number"):
            HF.parse({"decode_batches": wrong})


# --------------------------------------------------------------------------- the runner's windows


def test_windows_run_on_to_the_end_of_an_episode():
    a, b = (Episode(name, "AudioCount", (), Query((), "1")) for name in ("a", "b"))
    work = [Work(k, ep) for k, ep in zip((1, 2, 3, 1, 2), (a, a, a, b, b), strict=True)]
    assert [len(w) for w in windows(work, 2, whole_episodes=True)] == [3, 2]
    assert [len(w) for w in windows(work, 2)] == [2, 2, 1]


# --------------------------------------------------------------------------- answers on tiny models


def with_reuse(backend: HFBackend, reuse: str) -> HFBackend:
    """Another backend around the same model and processor (and feature cache, where it can take it), with ``reuse``."""
    other = backend.with_options(reuse=reuse)
    share_features(backend, other)
    return other


@pytest.fixture
def prefix_backends(tiny_backends):
    """family → the default backend (reuse=prefix), fp32 on the CPU."""
    assert {backend.reuse for backend in tiny_backends.values()} == {"prefix"}
    return tiny_backends


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_reuse_answers_equal_generate_from_scratch_for_every_task_and_k(
    prefix_backends, one_episode_each, family
):
    assert_reuse_answers_equal_generate(prefix_backends[family], one_episode_each)


@pytest.fixture(scope="module")
def fast_path_families(tmp_path_factory):
    """family → the default backend (fp32, CPU) of every family beyond the Qwen ones that has the fast path,
    around its tiny checkpoint."""
    from audioicl.backends.hf.reuse.parts import PARTS
    from audioicl.testing.families import TINY

    root = tmp_path_factory.mktemp("fast-path-families")
    loaded = {
        name: load_backend(
            ModelSpec("hf", str(TINY.get(name).write(root / name, 0))),
            dtype="fp32",
            device="cpu",
        )
        for name in TINY.names()
        if name in PARTS and name not in FAMILY_NAMES  # the Qwen ones: prefix_backends
    }
    yield loaded
    for backend in loaded.values():
        backend.close()


@pytest.mark.parametrize("family", ["apertus1p5", "gemma4", "gemma4_unified", "voxtral"])
def test_every_fast_path_family_answers_as_generate_from_scratch(
    fast_path_families, one_episode_each, monkeypatch, family
):
    assert set(fast_path_families) == {"apertus1p5", "gemma4", "gemma4_unified", "voxtral"}
    backend = fast_path_families[family]
    # the answers as their token ids: a tiny tokenizer spells few of the ids a tiny model writes (Gemma 4's
    # decodes most to nothing), and the ids are what the paths must agree on
    spelled = lambda tokens, *_, **__: " ".join(map(str, tokens))  # noqa: E731
    monkeypatch.setattr(backend.processor.tokenizer, "decode", spelled)
    assert_reuse_answers_equal_generate(backend, one_episode_each, short=True)


@pytest.mark.parametrize("family", ["gemma4", "gemma4_unified", "voxtral", "qwen2-audio"])
def test_a_family_with_the_fast_path_takes_it_unless_told_off(family):
    """Gemma 4's was only where asked until its GPU check (issue 41); a sampling call's ``generate`` inputs
    now carry the processor's ``mm_token_type_ids`` (tests/backends/test_families.py)."""
    from audioicl.backends.families import FAMILIES

    assert reuse_for(HF.parse({}), FAMILIES.get(family)) == "prefix"
    assert reuse_for(HF.parse({"reuse": "off"}), FAMILIES.get(family)) == "off"
    assert reuse_for(HF.parse({"attn": "flash_attention_2"}), FAMILIES.get(family)) == "off"


def assert_reuse_answers_equal_generate(prefix: HFBackend, root: Path, *, short: bool = False) -> None:
    """Every task at k = 1..5: the same answers from scratch (``reuse=off``), with each clip encoded once
    (``audio``), with each episode's prefix shared (``prefix``, the backend's default), with rows packed, and
    with three batches read one by one and decoded together (alone and packed).

    ``short``: the short prompts only, every task but MorseCode at k = 1 and 2 (rows of two prompts sharing
    their prefix, several batches still): the same code on a tenth of the positions. The long prompts (the
    26-clip letter bank, five demonstrations) are the Qwen families' (``test_reuse_answers_equal_...``)."""
    assert prefix.reuse == "prefix" and prefix.info["reuse"] == "prefix"
    requests = episode_major_requests(root, prefix.family)
    assert len({r.task for r in requests}) == 9 and {r.k for r in requests} == {1, 2, 3, 4, 5}
    if short:
        requests = [r for r in requests if r.k <= 2 and r.task != "MorseCode"]
    config = GenerationConfig(max_new_tokens=6, batch_size=7)  # several batches, rows of unequal length
    answers = {}
    variants = {
        "prefix": prefix,
        "packed": prefix.with_options(pack="on"),
        "together": prefix.with_options(decode_batches=3),
        "packed together": prefix.with_options(pack="on", decode_batches=3),
    }
    for reuse in ("off", "audio", *variants):
        backend = variants.get(reuse) or with_reuse(prefix, reuse)
        backend.clear_caches()  # the backend is the session's: count what this run encodes
        work_before = backend.work["encoded_clips"]
        responses = backend.generate(requests, config)
        assert all(r.error is None for r in responses), [r.error for r in responses if r.error]
        answers[reuse] = [(r.text, r.usage) for r in responses]
        if reuse != "off":  # each distinct clip through the encoder once, the letter bank included
            distinct = {part.digest for r in requests for part in r.chat.audio_parts()}
            encoded = backend.path.embeddings.misses
            assert encoded == len(distinct) == backend.work["encoded_clips"] - work_before
    assert answers["audio"] == answers["off"]
    assert answers["prefix"] == answers["off"]
    assert answers["packed"] == answers["off"]
    assert answers["together"] == answers["packed together"] == answers["off"]
    assert len({text for text, _ in answers["off"]}) > 1  # the answers say something about the prompts


def test_prefix_sharing_reads_fewer_positions(prefix_backends, one_episode_each):
    prefix = prefix_backends["qwen2-audio"]
    requests = episode_major_requests(one_episode_each, prefix.family)
    alone = with_reuse(prefix, "audio")
    config = GenerationConfig(max_new_tokens=2, batch_size=16)
    for backend in (prefix, alone):
        backend.reset_counters()
        backend.generate(requests, config)
    assert prefix.work["lm_tokens"] < 0.7 * alone.work["lm_tokens"]
    packed = prefix.with_options(pack="on")
    packed.reset_counters()
    packed.generate(requests, config)
    assert packed.work["lm_tokens"] == prefix.work["lm_tokens"]  # the same prompts read, once each
    assert packed.work["lm_padding"] < prefix.work["lm_padding"]


def test_out_of_memory_in_the_reuse_path_halves_the_rows(prefix_backends, one_episode_each, monkeypatch):
    backend = prefix_backends["qwen2-audio"]
    requests = [r for r in episode_major_requests(one_episode_each, backend.family) if r.task == "AudioCount"]
    requests += [
        r for r in episode_major_requests(one_episode_each, backend.family) if r.task == "AudioRemap"
    ]
    config = GenerationConfig(max_new_tokens=3, batch_size=10)
    expected = [r.text for r in backend.generate(requests, config)]
    real = backend.path._generate_rows
    sizes: list[int] = []

    def fault(rows, clips, config):  # more than one row runs out of memory
        sizes.append(len(rows))
        assert sys.exc_info() == (None, None, None)
        if len(rows) > 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(rows, clips, config)

    monkeypatch.setattr(backend.path, "_generate_rows", fault)
    for learned in ("_failed_footprints", "_fitted"):  # the fixture's backend is shared: learn afresh
        monkeypatch.setattr(backend.halving, learned, {})
    failures = backend.work["out_of_memory"]
    assert [r.text for r in backend.generate(requests, config)] == expected
    assert sizes == [2, 1, 1]
    assert backend.work["out_of_memory"] == failures + 1
    sizes.clear()  # a batch as large as one that ran out of memory is halved without being tried
    assert [r.text for r in backend.generate(requests, config)] == expected
    assert sizes == [1, 1]
    assert backend.work["out_of_memory"] == failures + 1

    def always(rows, clips, config):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(backend.path, "_generate_rows", always)
    failed = backend.generate(requests, config)
    assert all(r.text is None and "out of memory on the smallest batch" in r.error for r in failed)


def test_batches_decoded_together_join_their_caches_or_fall_back_to_one_at_a_time(
    prefix_backends, one_episode_each, monkeypatch, caplog
):
    from audioicl.backends.hf.reuse import decode as reuse

    backend = prefix_backends["qwen2-audio"].with_options(decode_batches=3)
    assert backend.info["decode_batches"] == {"asked": 3, "used": 3}
    requests = episode_major_requests(one_episode_each, backend.family)
    config = GenerationConfig(max_new_tokens=4, batch_size=7)
    expected = [r.text for r in with_reuse(backend, "off").generate(requests, config)]
    joined: list[list[int]] = []
    real = reuse.join_caches

    def counted(caches, filled):
        joined.append([cache.layers[0].keys.shape[0] for cache in caches])
        return real(caches, filled)

    monkeypatch.setattr(reuse, "join_caches", counted)
    decodes, steps = backend.work["decodes"], backend.work["decode_steps"]
    decoding, setting_up = backend.seconds["decode"], backend.seconds["decode_setup"]
    assert [r.text for r in backend.generate(requests, config)] == expected
    assert max(len(rows) for rows in joined) == 3  # 21 prompts a decode, read 7 (two rows of 5) at a time
    assert sum(map(sum, joined)) == 9  # every episode's row read once
    # the record counts each decode and its steps after the prefill's token (3 at most), and of its seconds,
    # those of its first two steps
    assert backend.work["decodes"] - decodes == len(joined)
    assert len(joined) <= backend.work["decode_steps"] - steps <= 3 * len(joined)
    assert 0 < backend.seconds["decode_setup"] - setting_up <= backend.seconds["decode"] - decoding

    def refused(caches, filled):
        raise reuse.CachesNotJoinable("transformers 9.0's static cache keeps no keys")

    monkeypatch.setattr(
        reuse,
        "join_caches",
        lambda caches, filled: caches[0] if len(caches) == 1 else refused(caches, filled),
    )
    with caplog.at_level("WARNING", logger="audioicl.backends"):
        assert [r.text for r in backend.generate(requests, config)] == expected
        assert [r.text for r in backend.generate(requests, config)] == expected
    said = [r.getMessage() for r in caplog.records if "decode_batches 1" in r.getMessage()]
    assert len(said) == 1 and "keeps no keys" in said[0]
    assert backend.path.decoded_together == 1
    assert backend.info["decode_batches"] == {
        "asked": 3,
        "used": 1,
        "fallback": "transformers 9.0's static cache keeps no keys",
    }


def test_batches_join_a_decode_only_while_their_cache_fits_the_budget(prefix_backends):
    path = prefix_backends["qwen2-audio"].with_options(decode_batches=3).path
    assert path.decoded_together == 3 and path.join_budget.limit is None  # asked for: no budget
    reads = [[row] for row in pack([sequence(i, str(i), [1] * (10 + i)) for i in range(5)], share=True)]

    def groups() -> list[list[int]]:
        made = decode_groups(reads, path.decoded_together, lambda rows: path.join_budget.fits(rows, 2))
        return [[row.length for row in joined(group)] for group in made]

    assert [len(group) for group in groups()] == [3, 2]  # no budget: 3 at most
    # a row of length n, one prompt, 2 steps: n + 2 positions; joined rows pad to the longest
    path.join_budget.limit = 32 * path.join_budget.per_position
    assert groups() == [[10, 11], [12, 13], [14]]
    path.join_budget.limit = 1  # a read alone always runs (it is what decode_batches=1 runs)
    assert [len(group) for group in groups()] == [1, 1, 1, 1, 1]


def test_the_cpu_decodes_each_batch_alone_unless_asked(prefix_backends):
    backend = prefix_backends["qwen2.5-omni"]
    assert backend.path.decoded_together == 1
    assert backend.info["decode_batches"] == {"asked": "auto", "used": 1}


# --------------------------------------------------------------------------- trimmed features, valid frames


CLIP_SECONDS = (0.05, 1.0, 4.3, 12.0, 29.99, 30.0)


@pytest.mark.parametrize("family", ["qwen2-audio", "qwen2.5-omni"])
def test_a_trimmed_extraction_gives_the_frames_of_the_whole_window(prefix_backends, family):
    backend = prefix_backends[family]
    assert backend.clips.trim_to is not None
    clips = [noise_clip(seconds, seed) for seed, seconds in enumerate(CLIP_SECONDS)]
    trimmed = backend.clips.extract(
        clips
    )  # one call: padded to the longest clip plus a margin, not the window
    for clip, got in zip(clips, trimmed, strict=True):
        whole = backend.processor(
            text=[backend.model_family.placeholder],
            audio=[clip.wave],
            sampling_rate=16_000,
            return_tensors="pt",
        )
        tokens = int((whole["input_ids"] == backend.audio_token_id).sum())
        assert (got.valid, got.tokens) == (int(whole["feature_attention_mask"].sum()), tokens)
        kept = got.features.shape[1]
        assert kept >= got.valid and torch.equal(got.features, whole["input_features"][0][:, :kept])


def test_the_encoder_over_valid_frames_equals_the_encoder_over_the_window(prefix_backends):
    from audioicl.backends.hf.reuse.parts import PARTS

    backend = with_reuse(prefix_backends["qwen2-audio"], "off")  # extracts over the whole window
    assert backend.clips.trim_to is None
    made = backend.clips.extract([noise_clip(seconds, seed) for seed, seconds in enumerate(CLIP_SECONDS)])
    features, mask = feature_batch(made, backend.model_family, backend.model.dtype)
    tokens = [clip.tokens for clip in made]
    with torch.inference_mode():
        window = PARTS["qwen2-audio"](backend.model, "window").encode(features, mask.sum(1), tokens)
        valid = PARTS["qwen2-audio"](backend.model, "valid").encode(features, mask.sum(1), tokens)
    for a, b, count in zip(window, valid, tokens, strict=True):
        assert a.shape == b.shape == (count, backend.model.config.text_config.hidden_size)
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_prompts_prepared_ahead_give_the_same_answers(prefix_backends, one_episode_each):
    backend = prefix_backends["qwen2-audio"]
    requests = episode_major_requests(one_episode_each, backend.family)[:12]
    config = GenerationConfig(max_new_tokens=4, batch_size=6)
    expected = [r.text for r in backend.generate(requests, config)]
    worker = threading.Thread(target=backend.prefetch, args=(requests[4:],))  # as the runner does it
    worker.start()
    worker.join()
    assert [r.text for r in backend.generate(requests, config)] == expected  # 4 prepared now, 8 ahead
    assert backend._ahead == {}  # each prepared prompt used once


def test_clips_encoded_ahead_in_the_preparing_thread_give_the_same_answers(
    prefix_backends, one_episode_each, tmp_path
):
    """``-o encode_ahead=on``: the runner's preparing thread encodes the next window's clips (each distinct
    clip once in all, whichever thread gets to it), and the answers are those of a run that encodes them in
    ``generate``."""
    from audioicl import ModelSpec, RunOptions
    from audioicl.inference.runner import run

    plain = prefix_backends["qwen2-audio"]
    assert not plain.path.encodes_ahead and plain.info["encode_ahead"] == {"asked": "auto", "used": False}
    ahead = plain.with_options(encode_ahead="on")
    assert ahead.path.encodes_ahead and ahead.info["encode_ahead"] == {"asked": "on", "used": True}
    threads: list[str] = []
    encode = ahead.path._encode

    def noted(clips):
        threads.append(threading.current_thread().name)
        return encode(clips)

    ahead.path._encode = noted
    answers = {}
    for name, backend in (("plain", plain), ("ahead", ahead)):
        backend.clear_caches()
        backend.reset_counters()
        options = RunOptions(
            data=one_episode_each,
            model=ModelSpec("hf", "tiny"),
            out=tmp_path / name,
            batch_size=4,
            max_new_tokens=4,
        )
        summary = run(options, report=lambda _: None, backend=backend)
        lines = [json.loads(line) for k in summary.ks for line in k.path.read_text().splitlines()]
        answers[name] = {(line["id"], len(line["audio_paths"])): line["response"] for line in lines}
    assert answers["ahead"] == answers["plain"] and len(answers["plain"]) == 45
    assert any(name.startswith("audioicl-prepare") for name in threads)  # the windows after the first
    assert ahead.seconds["encode_ahead"] > 0
    assert ahead.work["encoded_clips"] == plain.work["encoded_clips"]  # none encoded twice


def test_the_models_thread_finds_encoded_clips_while_the_preparing_thread_encodes_others(
    prefix_backends, one_episode_each
):
    """Regression (issue 41): the model's thread read the embedding cache under the lock the preparing thread
    holds for a whole chunk through the encoder (on the side stream, behind the prefill's kernels): 20 s of a
    whole Qwen2-Audio run on an H100 waited there with the GPU idle. Clips already encoded are found without
    waiting for the encoder."""
    backend = prefix_backends["qwen2-audio"]
    path = backend.path
    requests = episode_major_requests(one_episode_each, backend.family)[:4]
    prepared, _ = backend.prepare(requests)
    clips = {d: c for item in prepared for d, c in zip(item.digests, item.clips, strict=True)}
    with torch.inference_mode():
        encoded = path._embeddings(clips)
    found: dict = {}
    with path._encode_lock:  # the preparing thread in the middle of an encoder call
        reader = threading.Thread(target=lambda: found.update(path._embeddings(clips)), daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert not reader.is_alive(), "the model's thread waited for the encoder to read the cache"
    assert found.keys() == encoded.keys() and all(found[d] is encoded[d] for d in found)


def test_encoding_ahead_that_fails_leaves_the_clips_to_generate(prefix_backends, one_episode_each, caplog):
    plain = prefix_backends["qwen2-audio"]
    backend = plain.with_options(encode_ahead="on")
    requests = episode_major_requests(one_episode_each, backend.family)[:12]
    config = GenerationConfig(max_new_tokens=4, batch_size=6)
    expected = [r.text for r in plain.generate(requests, config)]
    encode = backend.path._encode

    def out_of_memory_ahead(clips):
        if threading.current_thread() is not threading.main_thread():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return encode(clips)

    backend.path._encode = out_of_memory_ahead
    with caplog.at_level("WARNING", logger="audioicl.backends"):
        for window in (requests[:6], requests[6:]):
            worker = threading.Thread(target=backend.prefetch, args=(window, config))  # as the runner does
            worker.start()
            worker.join()
    assert backend.work["encode_ahead_stopped"] == 2
    said = [r.getMessage() for r in caplog.records if "encoding ahead stopped" in r.getMessage()]
    assert said == [
        "hf backend: encoding ahead stopped, generate encodes the rest: "
        "CUDA out of memory. Tried to allocate 2.00 GiB"
    ]
    assert [r.text for r in backend.generate(requests, config)] == expected


def test_a_prompt_prepared_ahead_is_used_only_for_the_same_request(prefix_backends, one_episode_each):
    """A run that stops after ``prefetch`` leaves prompts prepared ahead; a later run on the same backend
    (a study's next condition) asks under the same keys with other chats, and must not get the old ones."""
    backend = prefix_backends["qwen2-audio"]
    requests = episode_major_requests(one_episode_each, backend.family)[:6]
    config = GenerationConfig(max_new_tokens=4, batch_size=6)
    other_chats = [replace(r, chat=s.chat) for r, s in zip(requests, reversed(requests), strict=True)]
    expected = [r.text for r in backend.generate(other_chats, config)]
    backend.prefetch(requests)  # never asked: that run stopped
    assert [r.text for r in backend.generate(other_chats, config)] == expected
    backend._ahead.clear()


# --------------------------------------------------------------------------- a read's common prefix, read once


def test_the_common_prefix_stops_at_a_differing_token_or_clip_and_before_each_trunks_last_token():
    from audioicl.backends.hf.reuse.rows import MIN_COMMON_PREFIX, common_prefix

    head = list(range(1, 41))  # 40 text tokens
    a = sequence(0, "a", [*head, *[AUDIO] * 10, 7, 8, 9], [("clip-x", 10)])
    other_token = sequence(1, "b", [*head[:35], 500, *head[36:], *[AUDIO] * 10, 7, 8, 9], [("clip-x", 10)])
    other_clip = sequence(2, "c", [*head, *[AUDIO] * 10, 7, 8, 9], [("clip-y", 10)])  # same ids, other sound
    same = sequence(3, "d", [*head, *[AUDIO] * 10, 7, 8, 5], [("clip-x", 10)])
    short = sequence(4, "e", [*head, *[AUDIO] * 10], [("clip-x", 10)])  # its last token is the clip's
    rows = {s.index: r for s in (a, other_token, other_clip, same, short) for r in pack([s], share=True)}
    assert len(common_prefix([rows[0], rows[1]])) == 35  # up to the one token that differs
    assert len(common_prefix([rows[0], rows[2]])) == 40  # up to the clip that differs, though its ids agree
    both = common_prefix([rows[0], rows[3]])
    assert len(both) == 52 and both.clips == (ClipSpan("clip-x", 40, 10),)  # all but the last token
    cut = common_prefix([rows[0], rows[4]])  # before short's last token: inside the clip
    assert len(cut) == 49 and cut.clips == (ClipSpan("clip-x", 40, 9),)
    assert common_prefix([rows[0]]) is None  # one row: nothing to share
    few = sequence(5, "f", [*head[: MIN_COMMON_PREFIX - 1], 900, 901], [])
    assert common_prefix([rows[0], pack([few], share=True)[0]]) is None  # too short to be worth a call


def test_a_reads_common_prefix_gives_the_tokens_and_logits_of_reading_it_in_every_row(
    prefix_backends, monkeypatch
):
    """Rows whose common prefix ends inside a clip, and rows that differ one token after it, read with the
    prefix once and copied: the same first logits (to rounding) and tokens as each row read whole."""
    from audioicl.backends.hf.reuse import decode
    from audioicl.backends.hf.reuse import rows as rows_module

    backend = prefix_backends["qwen2-audio"]
    parts, audio_id = backend.path.parts, backend.audio_token_id
    hidden = parts.decoder.get_input_embeddings().weight.shape[1]
    generator = torch.Generator().manual_seed(3)
    audio = {name: torch.randn(12, hidden, generator=generator) for name in ("x", "y")}
    text = torch.randint(10, 500, (60,), generator=generator).tolist()

    def prompt(index, group, tail, clip="x"):
        ids = [*text[:40], *[audio_id] * 12, *tail]
        return token_sequence(index, group, ids, audio_id, [(clip, 12)])

    sequences = [
        prompt(0, "a", text[40:50]),
        prompt(1, "a", text[40:46]),  # a's second prompt: shares a's trunk within the row
        prompt(2, "b", [text[40] + 1, *text[41:52]]),  # differs one token after the clip
        prompt(3, "c", []),  # ends with the clip: the common prefix is cut inside it
        prompt(4, "d", text[40:48], clip="y"),  # another sound with the same ids
    ]
    default = rows_module.MIN_COMMON_PREFIX
    for chosen in ([0, 1, 2], [0, 1, 2, 3], [0, 2, 4]):
        rows = pack([sequences[i] for i in chosen], share=True)
        made = {}
        for label, least in (("once", default), ("whole", 10**6)):
            monkeypatch.setattr(rows_module, "MIN_COMMON_PREFIX", least)
            work: dict[str, int] = {}
            with torch.inference_mode():
                done = decode.prefill(parts, [rows], audio, 3, 0, torch.float32, torch.device("cpu"), work)
                tokens = decode.generate_rows(
                    parts, [rows], audio, 4, [10**6], 0, torch.float32, torch.device("cpu")
                )
            made[label] = (done.logits, tokens, work.get("lm_read_once", 0))
        used = [(r, m) for r, row in enumerate(rows) for m in range(len(row.members))]  # not empty slots
        for r, m in used:
            torch.testing.assert_close(made["once"][0][r, m], made["whole"][0][r, m], rtol=1e-4, atol=1e-4)
        assert made["once"][1] == made["whole"][1]
        assert made["whole"][2] == 0 and made["once"][2] > 0
    assert made["once"][2] == 40 * 2  # [0, 2, 4]: the clip differs (y): the 40 text tokens, once for 3 rows


@pytest.mark.parametrize("family", ["qwen2-audio", "qwen2.5-omni", "gemma4"])  # plain, a thinker, shared KV
def test_episodes_of_one_task_read_their_instruction_and_letter_bank_once(request, nine_tasks, family):
    """MorseCode's episodes, one read: the system prompt, instruction and 26-clip letter bank every episode
    begins with read once (each family's decoder: Gemma 4's shared and sliding layers, the Omni thinkers'); the
    answers those of ``generate`` from scratch."""
    backends = request.getfixturevalue("prefix_backends" if family in FAMILY_NAMES else "fast_path_families")
    backend = backends[family]
    requests = [r for r in episode_major_requests(nine_tasks, backend.family) if r.task == "MorseCode"]
    assert len({r.episode_id for r in requests}) == 3
    config = GenerationConfig(max_new_tokens=4, batch_size=len(requests))
    expected = [r.text for r in with_reuse(backend, "off").generate(requests, config)]
    backend.reset_counters()
    assert [r.text for r in backend.generate(requests, config)] == expected
    assert backend.work["lm_read_once"] > 2 * 26 * 10  # the bank's clips, twice spared


def test_a_reads_cache_counts_its_writes_on_the_decoders_device_one_counter_a_layer(prefix_backends):
    """transformers makes each static layer's write position on the CPU and copies it to the GPU at the
    layer's first write: a copy that waits for every kernel queued before it, once a layer a read."""
    parts = prefix_backends["qwen2-audio"].path.parts
    device = parts.decoder.get_input_embeddings().weight.device
    cache = parts.cache(48)
    counters = [layer.cumulative_length for layer in cache.layers]
    assert all(c.device == device and c.dtype == torch.long and int(c) == 0 for c in counters)
    assert len({id(c) for c in counters}) == len(counters)  # each layer's own, as transformers makes them


def test_with_a_capture_ahead_the_host_queues_the_first_steps_before_waiting_and_stops_alike(
    prefix_backends, monkeypatch
):
    """With CUDA graphs, the first decode step and the capture are queued behind the prefill without
    waiting for it (whether every prompt stopped is asked from the second step on): the same tokens as a
    decode that asks after every step, prompts that stop at their first token included."""
    from audioicl.backends.hf.reuse import decode
    from audioicl.backends.hf.reuse.graphs import FastPaths

    backend = prefix_backends["qwen2-audio"]
    parts, cpu = backend.path.parts, torch.device("cpu")
    generator = torch.Generator().manual_seed(5)
    sequences = [
        sequence(i, str(i), torch.randint(AUDIO + 1, 500, (20 + 3 * i,), generator=generator).tolist())
        for i in range(4)
    ]
    rows = pack(sequences, share=True)
    events: list[str] = []
    real_bool = torch.Tensor.__bool__

    def waits(tensor):  # every ``bool(...)`` of a tensor in decode.py: the host waiting for the device
        if sys._getframe(1).f_code.co_filename == decode.__file__:
            events.append("wait")
        return real_bool(tensor)

    def captured(step, paths):
        events.append("capture")
        return step

    monkeypatch.setattr(torch.Tensor, "__bool__", waits)
    monkeypatch.setattr(decode, "replayed", captured)
    graphs = FastPaths(compile=False, cuda_graphs=True, asked={})
    with torch.inference_mode():
        plain = decode.generate_rows(parts, [rows], {}, 6, [10**6], 0, torch.float32, cpu)
        events.clear()
        ahead = decode.generate_rows(parts, [rows], {}, 6, [10**6], 0, torch.float32, cpu, paths=graphs)
        assert ahead == plain
        assert events[:2] == ["capture", "wait"]
        # every prompt stops at its first token: the capture's two steps run, the answers are cut alike
        firsts = {tokens[0] for tokens in plain.values()}
        stopped = decode.generate_rows(parts, [rows], {}, 6, firsts, 0, torch.float32, cpu)
        stopped_ahead = decode.generate_rows(
            parts, [rows], {}, 6, firsts, 0, torch.float32, cpu, paths=graphs
        )
    assert all(len(tokens) == 1 for tokens in stopped.values())
    assert {i: tokens[:1] for i, tokens in stopped_ahead.items()} == stopped
    assert all(len(tokens) == 3 for tokens in stopped_ahead.values())
