"""The env package stays light: importing it, and building envs with TF-IDF similarity, loads neither torch nor
transformers (the README promises exactly this; the default MiniLM similarity loads them on the first env built)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "sentence_transformers")


def loaded_after(code: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"import sys\n{code}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])


def test_importing_the_envs_loads_neither_torch_nor_transformers() -> None:
    assert loaded_after("import llm_marl_envs\nfrom llm_marl_envs import writing_v0, coding_v0") == []


def test_tfidf_envs_load_neither_torch_nor_transformers() -> None:
    code = (
        "from llm_marl_envs import writing_v0, coding_v0\n"
        "for module, extra in ((writing_v0, {}), (coding_v0, {'executor': 'local'})):\n"
        "    env = module.parallel_env(similarity='tfidf', **extra)\n"
        "    env.reset(seed=0)\n"
        "    env.step({agent: 'a draft <done/>' for agent in env.agents})\n"
        "    env.close()\n"
    )
    assert loaded_after(code) == []
