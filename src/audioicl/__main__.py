"""``python -m audioicl``: the same as the ``audioicl`` command."""

import sys

from audioicl.cli import main

sys.exit(main())
