"""The study with the baselines' rule blocks as they were before 1401d82: every agent told it sees its teammates'
current drafts, whatever the env shows it (the propose-and-verify coders see none of each other's).

``python old_words.py ARGS`` runs ``llm-marl bench study ARGS`` in this process with
:func:`llm_marl_baselines.collaboration.drafts_seen` answering "every teammate", for which
:func:`llm_marl_envs.core.prompts.rule_block` gives the registry's text word for word (the old text); nothing else
changes. Only for PLAN.md's comparison of the two texts on the train split.
"""

import sys

import llm_marl_baselines.collaboration as collaboration
from llm_marl_benchmarks.study.cli import main


def every_teammate(env, agent: str) -> list[str]:
    """The old rule's claim: the agent sees every teammate's draft."""
    return [teammate for teammate in env.possible_agents if teammate != agent]


if __name__ == "__main__":
    collaboration.drafts_seen = every_teammate
    sys.exit(main(sys.argv[1:]))
