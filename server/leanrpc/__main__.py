"""`python -m leanrpc` runs the `leanrpc` command."""

import sys

from .commands import main

sys.exit(main())
