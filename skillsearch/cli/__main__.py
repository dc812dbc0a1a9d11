"""``python -m skillsearch.cli``: the same entry point as the ``skillsearch`` script."""

import sys

from skillsearch.cli import main

sys.exit(main())
