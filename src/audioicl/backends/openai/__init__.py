"""The ``openai`` kind: any OpenAI-compatible chat completions server (``--model openai:NAME``); the
backend lives in ``backend`` and needs the ``api`` extra (httpx)."""

from ..kinds import TEXT, VARIABLE, Kind, Option, number, whole

KIND = Kind(
    name="openai",
    summary="Any OpenAI-compatible chat completions server, clips sent as input_audio parts.",
    spec="openai:SERVED_MODEL_NAME",
    factory="audioicl.backends.openai.backend:make_openai",
    extra="api",
    packages=("httpx",),
    options=(
        Option("seed", whole(0), 0, "the run's seed (--seed): the retries' jitter", hidden=True),
        Option(
            "base_url",
            TEXT,
            "https://api.openai.com/v1",
            "the server (the same as --base-url)",
            note="--base-url, else $OPENAI_BASE_URL, else https://api.openai.com/v1",
        ),
        Option("api_key_env", VARIABLE, "OPENAI_API_KEY", "the environment variable holding the API key"),
        Option("concurrency", whole(1), 8, "requests in flight at once", keeps_answers=True),
        Option("timeout", number(0, above=True), 120.0, "seconds an attempt may take", keeps_answers=True),
        Option("max_retries", whole(0), 6, "retries of a 429, a 5xx, a timeout", keeps_answers=True),
        Option(
            "backoff", number(0), 1.0, "seconds before the first retry, doubled each time", keeps_answers=True
        ),
        Option("max_backoff", number(0), 60.0, "the longest wait between retries", keeps_answers=True),
        Option(
            "max_clip_seconds",
            number(0, above=True),
            None,
            "refuse longer clips before sending them",
            note="none: the server decides",
        ),
    ),
)
