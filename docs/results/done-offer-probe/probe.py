"""Train-split probe of offer-to-end wordings (never the eval split): the untrained writing team's early endings."""
import sys

import llm_marl_envs.core.observation as observation
from llm_marl_benchmarks import default_team

WORDINGS = {
    "current": "When your part is final, end your reply with:\n<done/>",
    "finished": "Finished? Then end your reply with:\n<done/>",
    "last_line": "When your part is final, put this alone on the last line:\n<done/>",
    "keep": "If your draft is already good, reply with only:\n<done/>",
    "either": "Write a better draft, or keep yours by replying:\n<done/>",
}
episodes = int(sys.argv[1])
names = sys.argv[2:] or list(WORDINGS)
for name in names:
    observation.DONE_OFFER = WORDINGS[name]
    print(f"=== {name}: {WORDINGS[name]!r}", flush=True)
    default_team.main(["--episodes", str(episodes), "--envs", "writing", "--conditions", "untrained", "plain",
                       "--split", "train", "--json", f"/work/runs/offer/{name}_{episodes}.json"])
