"""The ``audioicl`` command: argument parsing only; each sub-command calls into the library."""
