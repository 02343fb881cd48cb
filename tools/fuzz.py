"""Run the differential fuzzer for a number of programs or seconds (docs/fuzzing.md).

.venv/bin/python tools/fuzz.py --programs 5000 --out fuzz-failures
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fuzz.longrun import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
