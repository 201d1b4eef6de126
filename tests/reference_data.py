"""Where the original AudioICL-Bench meta files are: ``shared/reference`` beside the repository (where the
workspace and CI lay it), or the folder named by ``$AUDIOICL_REFERENCE``."""

import os
from pathlib import Path

REFERENCE = Path(
    os.environ.get("AUDIOICL_REFERENCE", Path(__file__).resolve().parents[1].parent / "shared" / "reference")
)
