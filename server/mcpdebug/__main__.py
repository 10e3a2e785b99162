"""``python -m mcpdebug``: the `mcpdebug` command (how the server and the plugin start runners)."""

import sys

from mcpdebug.cli import main

sys.exit(main())
