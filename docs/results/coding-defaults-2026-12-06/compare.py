"""The shipped coding teams under today's defaults (the ``"half"`` ending, replies stopped at their code block's
end): the study's ``results`` preset, coding, sizes 2 and 4 (see PLAN.md).

``python compare.py`` (in this folder, with ``episodes.jsonl`` the run's log) prints, per team size, the trained team
against its untrained team, one agent and one agent's best of n on the plan's metrics, and the untrained team against
one agent (paired by task and seed, 95 % CI, paired t), with each condition's episodes, precision and decoding stops;
then, by the plan's addendum, the untrained team of 2 with the stop against the same pairs without it
(``untrained-off/episodes.jsonl``). It writes ``figures.json``.
"""

from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, decoding_stops, precisions, read_episodes

HERE = Path(__file__).resolve().parent
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")
OTHERS = ("untrained", "single", "single_best_of_n")


def main() -> None:
    rows = read_episodes(HERE / "episodes.jsonl").rows
    figures: dict = {"episodes": dict(Counter(f"{r['team_size']}/{r['condition']}" for r in rows)),
                     "precision": precisions(rows), "decoding": decoding_stops(rows)}
    print(figures["episodes"])
    print(f"precision: {[(p['dtype'], p['episodes']) for p in figures['precision']]}; stopped at the reply end: "
          f"{[(d['stop_at_reply_end'], d['episodes']) for d in figures['decoding']]}")
    for size in (2, 4):
        sized = [r for r in rows if r["team_size"] == size]
        print(f"\nteam size {size}:")
        # Beside the team's three: the untrained team against one agent (issue 42's "not below one agent").
        pairs = [("trained", c) for c in OTHERS] + [("untrained", "single")]
        figures[f"size {size}"] = compare_pairs(sized, pairs, METRICS, "coding", size=size, echo=True)
    # The plan's addendum: the untrained team of 2 on the same pairs without the stop (untrained-off/).
    off = [{**r, "condition": "untrained@off"} for r in read_episodes(HERE / "untrained-off" / "episodes.jsonl").rows]
    on = [{**r, "condition": "untrained@on"} for r in rows if r["team_size"] == 2 and r["condition"] == "untrained"]
    print("\nthe untrained team of 2, on − off:")
    figures["untrained, size 2, on - off"] = compare_pairs([*on, *off], [("untrained@on", "untrained@off")], METRICS,
                                                           "coding", size=2, echo=True)
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
