"""``llm-marl demo``: a few real episodes of the envs driven by a policy, with a per-episode summary table.

Without arguments it runs 2 episodes of each env (2 agents, at most 2 turns, 96 new tokens) with the offline default
model SmolLM2-135M-Instruct through the minimal local-model loop (each agent acts on its raw observation).
``--baseline`` picks one of the five collaboration baselines instead; ``--policy`` picks the backend.
``--adapters DIR`` plays a trained team: the output folder of ``llm-marl train`` (or one of its checkpoints), whose
``team.json`` fixes the env, the team size and the env's arguments. Progress (episodes and turns done, ETA) shows
while the episodes run; the table comes at the end.

    llm-marl demo [--baseline NAME] [--env writing|coding|both] [--episodes N] [--num-agents N]
                  [--max-new-tokens N] [--max-turns N] [--policy local|endpoint|scripted|adapters] [--json PATH]
    llm-marl demo --adapters DIR [--episodes N] [--max-turns N] [--max-new-tokens N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from llm_marl_baselines.collaboration import BASELINES, PLAIN, EpisodeResult, get_baseline, run_episodes
from llm_marl_baselines.policies import (
    POLICY_KINDS,
    GenerationSettings,
    Policy,
    env_reply_ends,
    env_role_budgets,
    make_policy,
)
from llm_marl_benchmarks.env_probe import read_only_env
from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.progress import EpisodeProgress
from llm_marl_envs.registry import ENV_NAMES

DRAFT_PREVIEW_CHARS = 160


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends each option's default to its help, except a ``None`` default: that help says what happens instead
    (``--model``'s "(default: offline SmolLM2) (default: None)" came from appending it blindly)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand to the ``llm-marl`` parser."""
    parser = subparsers.add_parser(
        "demo",
        help="run a few real episodes of the envs with a policy and print a summary",
        description=__doc__.split("\n\n")[1],
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--baseline", choices=[PLAIN.name, *BASELINES], default=PLAIN.name,
                        help="collaboration baseline (plain = the env's own prompts, no framing)")
    parser.add_argument("--env", choices=[*ENV_NAMES, "both"], default="both", help="which env's episodes to run")
    parser.add_argument("--episodes", type=_positive_int, default=2, help="episodes per env")
    parser.add_argument("--num-agents", type=int, choices=(1, 2, 3, 4), default=2,
                        help="agents per team (single_agent always uses one)")
    parser.add_argument("--max-turns", type=_positive_int, default=None,
                        help="turns of the plain loop (default 2) and of prompt_collaboration (default 3); "
                        "the other baselines fix their own")
    parser.add_argument("--max-new-tokens", type=_positive_int, default=None,
                        help="most tokens the policy may generate per action (default: each env's budget for its "
                             "roles, e.g. 128 for the writing pair, 160 for the coding pair)")
    parser.add_argument("--stop-at-reply-end", action=argparse.BooleanOptionalAction, default=None,
                        help="local and adapters policies: each reply stops where the env stops reading it "
                             "(env.suggested_reply_end: a coder's where its code block closes). Default: on for "
                             "them, as in the study; the flag refuses a policy that decodes nothing here")
    parser.add_argument("--role-budgets", action="store_true",
                        help="local and adapters policies: each reply stops at its own role's token budget "
                             "(env.suggested_max_new_tokens([agent]): a coding verifier's 48), not the team's")
    parser.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (0: greedy)")
    parser.add_argument("--top-p", type=float, default=0.95, help="nucleus sampling: keep the smallest set of "
                        "tokens whose probabilities add up to this")
    parser.add_argument("--seed", type=int, default=0, help="first episode seed (episode i uses seed+i)")
    parser.add_argument("--split", choices=("train", "eval"), default="train", help="the task split to draw from")
    parser.add_argument("--policy", choices=tuple(POLICY_KINDS), default="local",
                        help="who writes the actions: scripted (no model), local (a Hugging Face model), adapters "
                        "(a trained team directory) or endpoint (an OpenAI-compatible server)")
    parser.add_argument("--model", default=None,
                        help="local policy: model folder or hub id (default: the offline SmolLM2-135M-Instruct)")
    parser.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float32", "float16"),
                        help="local and adapters policies: compute dtype (auto: bfloat16 where the hardware runs it "
                        "natively, else float32 on CPU and float16 on GPU)")
    parser.add_argument("--team-dir", default=None, help="adapters policy: the team directory")
    parser.add_argument("--adapters", default=None, metavar="DIR",
                        help="play a trained team: DIR is a team directory (llm-marl train's output folder or one of "
                        "its checkpoints: team.json + adapters/<agent>/); its env and team size come from team.json "
                        "(same as --policy adapters --team-dir DIR); 'builtin' plays the team shipped with the "
                        "package for --env and --num-agents")
    parser.add_argument("--base-url", default=None, help="endpoint policy: e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--endpoint-model", default=None, help="endpoint policy: served model name")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="endpoint policy: env var with the key")
    parser.add_argument("--executor", default="auto", choices=("auto", "docker", "bwrap", "local"),
                        help="coding env executor")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON")
    parser.set_defaults(func=run)


def build_policy(args: argparse.Namespace) -> Policy:
    """The policy the flags ask for (a clear error when a backend's required flag is missing)."""
    _resolve_adapters(args)
    if args.policy == "local":
        return make_policy("local", model=args.model, dtype=args.dtype)
    if args.policy == "adapters":
        if not args.team_dir:
            raise SystemExit("--policy adapters needs --team-dir DIR (a team directory, see baselines/README.md)")
        return make_policy("adapters", team_dir=args.team_dir, dtype=args.dtype)
    if args.policy == "endpoint":
        if not args.base_url or not args.endpoint_model:
            raise SystemExit("--policy endpoint needs --base-url URL and --endpoint-model NAME")
        return make_policy("endpoint", base_url=args.base_url, model=args.endpoint_model,
                           api_key_env=args.api_key_env)
    return make_policy("scripted")


def _resolve_adapters(args: argparse.Namespace) -> None:
    """``--adapters DIR`` is ``--policy adapters --team-dir DIR``, checked before any model loads."""
    folder = getattr(args, "adapters", None)
    if folder is None:
        return
    from llm_marl_baselines.policies.adapters import MANIFEST_NAME
    from llm_marl_baselines.teams import BUILTIN, builtin_team_dir

    if folder == BUILTIN:
        if args.env == "both":
            raise SystemExit("--adapters builtin plays one shipped team: choose it with --env (and --num-agents)")
        try:
            folder = args.adapters = str(builtin_team_dir(args.env, args.num_agents))
        except ValueError as error:
            raise SystemExit(f"--adapters builtin: {error}") from None

    if args.team_dir is not None and Path(args.team_dir) != Path(folder):
        raise SystemExit("--adapters DIR and --team-dir name two different teams; give one of them")
    if not Path(folder).is_dir():
        raise SystemExit(f"--adapters {folder}: no such folder")
    if not (Path(folder) / MANIFEST_NAME).is_file():
        raise SystemExit(f"--adapters {folder}: no {MANIFEST_NAME} there, so it is not a team directory; give the "
                         f"output folder of `llm-marl train` (or one of its checkpoint-* folders), which holds "
                         f"{MANIFEST_NAME} and adapters/<agent>/")
    args.policy, args.team_dir = "adapters", folder


def run(args: argparse.Namespace) -> int:
    """Run the demo episodes, print the summary and optionally write JSON; returns the exit status."""
    _resolve_adapters(args)
    decoded_here = args.policy in ("local", "adapters")
    if (args.stop_at_reply_end or args.role_budgets) and not decoded_here:  # before any model loads
        raise SystemExit(f"--stop-at-reply-end and --role-budgets need a local or adapters policy; the "
                         f"{args.policy} policy's replies are not decoded here")
    # The default (None) stops at reply ends wherever replies are decoded here, as the study does.
    stop_at_reply_end = args.stop_at_reply_end if args.stop_at_reply_end is not None else decoded_here
    stops_decoding = stop_at_reply_end or args.role_budgets
    base_settings = GenerationSettings(temperature=args.temperature, top_p=args.top_p,
                                       max_new_tokens=args.max_new_tokens or 1, seed=args.seed)
    envs = list(ENV_NAMES) if args.env == "both" else [args.env]
    seeds = [args.seed + i for i in range(args.episodes)]
    num_agents, team_env_kwargs = args.num_agents, {}
    start = time.perf_counter()
    results: list[EpisodeResult] = []
    budgets: dict[str, int] = {}
    # Loading a model takes seconds before the first episode; say so, so the wait is not silent.
    print(f"[demo] loading the {args.policy} policy", flush=True)
    with build_policy(args) as policy:
        manifest = getattr(policy, "manifest", None)
        if manifest is not None:  # a trained team plays the env, team size and env arguments it was trained for
            envs = [manifest.env_name]
            num_agents, team_env_kwargs = manifest.num_agents, dict(manifest.env_kwargs)
        turns = get_baseline(args.baseline).env_kwargs(num_agents, args.max_turns)["max_turns"]
        with EpisodeProgress(len(envs) * len(seeds), turns) as progress:
            for env in envs:
                env_kwargs = {**team_env_kwargs, **({"executor": args.executor} if env == "coding" else {})}
                agents = 1 if args.baseline == "single_agent" else num_agents
                with read_only_env(env, {**env_kwargs, "num_agents": agents}) as probe:  # its roles' budgets, ends
                    budgets[env] = args.max_new_tokens or probe.suggested_max_new_tokens()
                    if stops_decoding:  # this env's roles: the same agent name may end elsewhere in the other env
                        policy.reply_ends = env_reply_ends([probe]) if stop_at_reply_end else None
                        policy.role_max_new_tokens = env_role_budgets([probe]) if args.role_budgets else None
                settings = dataclasses.replace(base_settings, max_new_tokens=budgets[env])
                progress.begin(env)
                # The table needs texts only: no generation records, so a local model keeps no logits.
                results += run_episodes(args.baseline, env, policy, settings, seeds=seeds, num_agents=num_agents,
                                        split=args.split, max_turns=args.max_turns, env_kwargs=env_kwargs,
                                        on_turn=progress.on_turn, on_episode=progress.on_episode, records=False)
    elapsed = time.perf_counter() - start
    print_summary(results, f"{args.baseline} · {args.policy} policy · {elapsed:.1f} s")
    if args.json:
        settings_record = {**base_settings.to_dict(), "max_new_tokens": budgets}  # per env
        payload = {"settings": settings_record, "policy": args.policy, "baseline": args.baseline,
                   "elapsed_s": elapsed, "episodes": [r.to_dict() for r in results]}
        write_figures_json(args.json, payload, ensure_ascii=False)  # episode texts kept readable
    return 0


def print_summary(results: list[EpisodeResult], title: str) -> None:
    """A table (one row per episode) and a short preview of each episode's final drafts: drawn with rich when the
    ``[cli]`` extra is installed, else as plain aligned text (an envs-only install plays the demo too)."""
    columns = ("env", "seed", "task", "agents", "return", "turns", "quality", "consist.", "end", "s")
    left = {"env", "task", "agents", "end"}
    rows = [
        (r.env, str(r.seed), r.task_id, ",".join(r.agents), f"{r.episode_return:+.3f}", str(r.turns),
         f"{r.quality:.3f}", "-" if r.consistency is None else f"{r.consistency:.3f}", str(r.end_reason),
         f"{r.wall_s:.1f}")
        for r in results
    ]
    previews = []
    for r in results:
        lines = []
        for agent, draft in r.drafts.items():
            preview = " ".join(draft.split())
            preview = preview if len(preview) <= DRAFT_PREVIEW_CHARS else preview[:DRAFT_PREVIEW_CHARS] + "…"
            lines.append(f"  {agent}: {preview or '(empty)'}")
        previews.append((f"{r.env} seed {r.seed}", f" ({r.task_id})", lines))
    try:
        from rich.console import Console
        from rich.table import Table
    except ModuleNotFoundError:
        widths = [max(len(text) for text in column) for column in zip(columns, *rows, strict=True)]
        print(title)
        for row in (columns, *rows):
            print("  ".join(text.ljust(width) if name in left else text.rjust(width)
                            for name, text, width in zip(columns, row, widths, strict=True)).rstrip())
        for heading, task, lines in previews:
            print(heading + task, *lines, sep="\n")
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    for row in rows:
        table.add_row(*row)
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)  # pipes and CI logs default to 80 columns, which would cut every cell
    console.print(table)
    for heading, task, lines in previews:
        console.print(f"[bold]{heading}[/bold]{task}")
        for line in lines:
            console.print(line, markup=False, highlight=False)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value
