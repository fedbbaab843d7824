"""``python -m benchmarks.study``: see :mod:`benchmarks.study.cli`."""

import sys

from benchmarks.study.cli import main

sys.exit(main())
