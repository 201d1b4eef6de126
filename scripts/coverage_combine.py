"""Combine the parallel coverage data files of a ``scripts/coverage.sh`` run, setting aside (and counting) the
ones that cannot be read: a command that a test runs under a file-size limit or kills mid-write leaves a
truncated database, which would make ``coverage combine`` stop. ``python scripts/coverage_combine.py DATA_FILE``."""

from __future__ import annotations

import sys
from pathlib import Path

from coverage import CoverageData


def main() -> None:
    base = Path(sys.argv[1])
    parts = sorted(base.parent.glob(base.name + ".*"))
    combined = CoverageData(basename=str(base))
    combined.erase()
    taken, broken = 0, []
    for path in parts:
        try:
            data = CoverageData(basename=str(path))
            data.read()
            for measured in data.measured_files():  # reads every file's numbers: a truncated database fails
                data.arcs(measured) if data.has_arcs() else data.lines(measured)
            if data.measured_files() and not data.has_arcs():
                raise ValueError("line data, not branch data (not written by scripts/coverage.sh's settings)")
            combined.update(data)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is set aside, whatever coverage raises
            broken.append(f"{path.name}: {exc}")
            continue
        taken += 1
    for measured in combined.measured_files():  # the whole result reads back before any part is removed
        combined.arcs(measured)
    for path in parts:
        path.unlink()
    print(f"combined {taken} data files; set aside {len(broken)} unreadable:", file=sys.stderr)
    for line in broken:
        print(f"  {line}", file=sys.stderr)


if __name__ == "__main__":
    main()
