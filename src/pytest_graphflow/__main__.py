"""``python -m pytest_graphflow``: the ``graphflow`` command (see ``graphflow --help``)."""

from __future__ import annotations

import sys

from ._cli._main import main

if __name__ == "__main__":
    sys.exit(main())
