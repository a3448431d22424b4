"""``python -m memci``: the ``memci`` command (:mod:`memci.cli.main`)."""

import sys

from memci.cli.main import main

sys.exit(main())
