"""``python -m llm_marl_benchmarks.study``: see :mod:`llm_marl_benchmarks.study.cli`."""

import sys

from llm_marl_benchmarks.study.cli import main

sys.exit(main())
