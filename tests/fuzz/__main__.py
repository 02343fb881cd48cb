"""``python -m tests.fuzz``: the long fuzz run (see tests/fuzz/longrun.py)."""

import sys

from tests.fuzz.longrun import main

sys.exit(main())
