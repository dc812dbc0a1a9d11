"""``python -m skillsearch``: the ``skillsearch`` command, for a host or a shell that has the interpreter but not
the script on its ``PATH`` (an MCP host's ``"command": "python", "args": ["-m", "skillsearch", "mcp"]``)."""

import sys

from skillsearch.cli import main

sys.exit(main())
