"""Paired comparison of each scheme's untrained team with one agent (the single condition of the magrpo run)."""
import json
from pathlib import Path

from llm_marl_benchmarks.study.stats import compare, mean_ci

ROOT = Path(__file__).resolve().parent  # the run folders beside this script


def rows(scheme):
    path = ROOT / scheme / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")] if path.exists() else []


single = {(r["task"], r["seed"]): r for r in rows("magrpo") if r["condition"] == "single"}
print(f"single: {len(single)} episodes, pass rate {mean_ci([r['pass_rate'] for r in single.values()])}")
for scheme in ("magrpo", "magrpo_fallback", "propose_verify", "author_fixer"):
    team = {(r["task"], r["seed"]): r for r in rows(scheme) if r["condition"] == "untrained"}
    keys = sorted(set(team) & set(single))
    if not keys:
        print(scheme, "no pairs yet")
        continue
    a = [team[k]["pass_rate"] for k in keys]
    b = [single[k]["pass_rate"] for k in keys]
    cmp = compare(a, b, paired=True)
    succ = sum(team[k]["success"] for k in keys), sum(single[k]["success"] for k in keys)
    turns = sum(team[k]["turns"] for k in keys) / len(keys), sum(single[k]["turns"] for k in keys) / len(keys)
    print(f"{scheme}: {len(keys)} pairs; team pass rate {sum(a)/len(a):.3f}, single {sum(b)/len(b):.3f}; "
          f"team - single {cmp}; success {succ[0]} vs {succ[1]}; turns {turns[0]:.2f} vs {turns[1]:.2f}")
