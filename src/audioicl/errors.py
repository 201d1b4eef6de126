"""The one exception type for problems a user can act on (bad input, bad options)."""

from __future__ import annotations

from collections.abc import Iterable


class AudioICLError(Exception):
    """A user-actionable error, located by file, line and episode id where known.

    The CLI prints it as one line (``file:line id: message``) and exits non-zero; anything
    else escaping to the CLI is a bug and keeps its traceback.
    """

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, id: str | None = None
    ):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.id = id

    def __reduce__(self):
        # Keep file, line, id (and any exit_code) when the error crosses processes (the builder's workers).
        return (type(self), (self.message,), self.__dict__)

    def location(self) -> str:
        where = ""
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
        if self.id:
            where = f"{where} {self.id}" if where else self.id
        return where

    def __str__(self) -> str:
        where = self.location()
        return f"{where}: {self.message}" if where else self.message


def refuse_duplicate_ids(ids_and_lines: Iterable[tuple[str, int]], file: str, why: str = "") -> None:
    """Raise on the second line that holds an id already seen (results and episodes are keyed by id)."""
    first_line: dict[str, int] = {}
    for episode_id, line in ids_and_lines:
        if episode_id in first_line:
            raise AudioICLError(
                f"id appears twice (first on line {first_line[episode_id]}){why}",
                file=file,
                line=line,
                id=episode_id,
            )
        first_line[episode_id] = line
