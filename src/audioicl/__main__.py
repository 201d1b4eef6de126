"""``python -m audioicl``: the same as the ``audioicl`` command."""

import sys

from audioicl.cli.main import main

sys.exit(main())
