"""MorseCode: a lowercase English word keyed in Morse code as a tone."""

from __future__ import annotations

import functools
import string

from audioicl.errors import AudioICLError
from audioicl.seeding import rng_for
from audioicl.synth import morse

from .base import LabelSpace, TaskSpec, register
from .context import BuildOptions, GenContext, PlannedEpisode, PlannedFile, TaskGenerator, single_clip_episode
from .transcripts import morse_text

WORDS_FOLDER = "data/MorseCode/words/wav"
ALPHABET_FOLDER = "data/MorseCode/alphabet"


def _keyed(text: str):
    return functools.partial(morse.key_text, text, morse.MorseStyle())


def _transcript(text: str) -> str:
    """The dots and dashes keyed, letter by letter."""
    return morse_text([[morse.MORSE_CODE[c] for c in word] for word in text.split()])


def _file(path: str, text: str) -> PlannedFile:
    return PlannedFile(path, _keyed(text), functools.partial(_transcript, text))


@functools.lru_cache(maxsize=8)
def _query_words(seed: int, episodes: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--queries distinct``: one word per episode for its query, none of them twice, and the words left
    for demos (a query word is never a demo anywhere, so its clip serves one episode only)."""
    order = rng_for(seed, "MorseCode", "query-words").permutation(len(morse.WORDS_5))
    words = [morse.WORDS_5[int(i)] for i in order]
    return tuple(words[:episodes]), tuple(sorted(words[episodes:]))


def _episode(ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    """Distinct words per episode; one clip per word, shared by every episode that uses the word (with
    ``--queries distinct`` a query word is used by its episode only)."""
    rng = ctx.rng(spec.name, index, "episode")
    if ctx.options.queries == "distinct":
        queries, demo_words = _query_words(ctx.options.seed, ctx.options.episodes)
        demos = [demo_words[int(i)] for i in rng.choice(len(demo_words), ctx.n_clips - 1, replace=False)]
        words = [*demos, queries[index]]
    else:
        words = [morse.WORDS_5[int(i)] for i in rng.choice(len(morse.WORDS_5), ctx.n_clips, replace=False)]
    clips = [(_path(ctx, word), word) for word in words]
    files = tuple(_file(path, word) for path, word in clips)
    return PlannedEpisode(single_clip_episode(ctx, spec, index, clips), files)


def _path(ctx: GenContext, word: str) -> str:
    name = ctx.token("MorseCode", word) if ctx.options.file_names == "neutral" else word
    return f"{WORDS_FOLDER}/{name}.wav"


def _alphabet(ctx: GenContext) -> tuple[PlannedFile, ...]:
    """The optional letter bank shown before the demos: ``A.wav`` ... ``Z.wav``, one letter each."""
    return tuple(_file(f"{ALPHABET_FOLDER}/{c}.wav", c.lower()) for c in string.ascii_uppercase)


def _check(options: BuildOptions) -> None:
    if options.max_shots + 1 > len(morse.WORDS_5):
        raise AudioICLError(f"MorseCode needs k < {len(morse.WORDS_5)} (distinct words per episode)")
    left = len(morse.WORDS_5) - options.episodes
    if options.queries == "distinct" and left < options.max_shots:
        raise AudioICLError(
            f"MorseCode with --queries distinct has {len(morse.WORDS_5)} words: one query word per episode "
            f"leaves {max(left, 0)} for the demos, k = {options.max_shots} needs {options.max_shots}; use fewer "
            "--episodes or --queries original"
        )


_STYLE = morse.MorseStyle()
_RECIPE = (
    f"A lowercase 5-letter English word (our own list of {len(morse.WORDS_5)} common words) keyed in Morse code "
    f"as a {_STYLE.tone_hz:g} Hz tone at {_STYLE.wpm:g} WPM with ITU timing: dot 1 unit, dash 3, 1 unit between "
    "the elements of a letter, 3 between letters, 7 between words, unit = 1.2 / WPM s; "
    f"{_STYLE.ramp_ms:g} ms raised-cosine ramps. The label is the word. Words are distinct within an episode; "
    f"one clip per word, and an alphabet bank `{ALPHABET_FOLDER}/A.wav`..`Z.wav`. Every episode's query word is "
    "its own: no other episode uses it, as query or demo (`--queries original`: words drawn from the whole list "
    "for every episode, so query words recur)."
)
_DIFFERENCES = (
    "The original did not document its Morse speed, tone or word list; ours are stated here and in "
    f"`audioicl.synth.morse`. Word clips have opaque names (`{WORDS_FOLDER}/<token>.wav`; `--file-names "
    "original`: `<word>.wav`, the label itself)."
)

_INSTRUCTION = (
    "Each audio clip below comes with a label. The clips are tones keyed in a hidden code that spells a "
    "lowercase English word, and the label is that word; the code is the same throughout this set. Learn the "
    "code from the labelled examples (and the letter clips, when given) and decode the query clip. Answer "
    "with the word only, in lowercase."
)

MORSE_CODE = register(
    TaskSpec(
        "MorseCode",
        6,
        "morse",
        LabelSpace("lowercase words", pattern=r"[a-z]+"),
        "word",
        _INSTRUCTION,
        generator=TaskGenerator(_episode, _RECIPE, _DIFFERENCES, shared=_alphabet, check=_check, cost_ms=5.0),
    )
)
