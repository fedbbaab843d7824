"""Local Hugging Face model policy: chat template, batched generation across agents and episodes (left padding).

The default model is the offline SmolLM2-135M-Instruct (see :mod:`llm_marl_baselines.models`); any local folder or hub
id works too. :func:`generate_records` (and its text-only form :func:`generate_actions`) is shared with the adapter
policy, which runs it once per role sub-batch.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from llm_marl_baselines.decoding import RowStop, RowTextStops, TopKSampler, sample_rows, token_texts
from llm_marl_baselines.graph_decode import decoder_for_active_adapter
from llm_marl_baselines.models import LoadedModel, load_model
from llm_marl_baselines.policies.base import ActionRequest, Generation, GenerationSettings, Policy
from llm_marl_baselines.prompt_store import DEFAULT_MAX_BYTES, PromptStore

DEFAULT_BATCH_SIZE = 16


def reply_prefix(messages: Sequence[Mapping[str, str]]) -> str:
    """The start of the reply a chat asks the model to continue: the content of a final ``assistant`` message (an env
    may begin a role's reply for it, e.g. with a code fence and a signature); ``""`` when the chat ends otherwise."""
    return str(messages[-1]["content"]) if messages and messages[-1].get("role") == "assistant" else ""


def check_reply_ends(reply_ends: Mapping[str, str | None] | None) -> dict[str, re.Pattern[str]] | None:
    """``reply_ends`` (agent -> regular expression, as an env's ``suggested_reply_end`` gives them) compiled; None
    stays None, and an agent whose pattern is None has no end (so ``{agent: env.suggested_reply_end(agent) for agent
    in env.possible_agents}`` may be passed as it is). A bad pattern or a value that is neither a string nor None is
    refused here, before any sampling."""
    if reply_ends is None:
        return None
    if not isinstance(reply_ends, Mapping):
        raise TypeError(f"reply_ends: expected a mapping of agent to pattern, got {type(reply_ends).__name__}")
    compiled = {}
    for agent, pattern in reply_ends.items():
        if pattern is None:
            continue
        if not isinstance(pattern, str) or not pattern:
            raise TypeError(f"reply_ends[{agent!r}]: expected a non-empty regular expression str or None, "
                            f"got {pattern!r}")
        try:
            compiled[agent] = re.compile(pattern, re.DOTALL)
        except re.error as error:
            raise ValueError(f"reply_ends[{agent!r}]: not a regular expression ({error}): {pattern!r}") from None
    return compiled


def check_role_budgets(budgets: Mapping[str, int] | None, max_new_tokens: int) -> dict[str, int] | None:
    """``budgets`` (agent -> the most new tokens its replies may take, e.g. an env's
    ``suggested_max_new_tokens([agent])``) checked, each capped at ``max_new_tokens``; None stays None."""
    if budgets is None:
        return None
    if not isinstance(budgets, Mapping):
        raise TypeError(f"role_max_new_tokens: expected a mapping of agent to int, got {type(budgets).__name__}")
    for agent, budget in budgets.items():
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"role_max_new_tokens[{agent!r}]: expected an int >= 1, got {budget!r}")
    return {agent: min(budget, max_new_tokens) for agent, budget in budgets.items()}


def reply_end_tests(reply_ends: Mapping[str, re.Pattern[str]] | None, agents: Sequence[str],
                    prefixes: Sequence[str]) -> list[RowStop | None] | None:
    """Per row (its agent and the reply's given start), the stop test that ends the row where its agent's reply
    ends: the first match of the agent's pattern in the reply so far, the given start included (a code fence the env
    opened counts). Agents without a pattern get None; None when there are no patterns at all."""
    if not reply_ends:
        return None

    def test_of(pattern: re.Pattern[str], prefix: str) -> RowStop:
        return lambda text: pattern.search(prefix + text) is not None

    tests = [test_of(reply_ends[agent], prefix) if agent in reply_ends else None
             for agent, prefix in zip(agents, prefixes, strict=True)]
    return tests if any(test is not None for test in tests) else None


def render_chat(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    """``messages`` through the model's chat template, ending where the model's reply starts: after the assistant
    turn's header, or inside a final ``assistant`` message, which the model continues (``continue_final_message``)."""
    chat = [dict(message) for message in messages]
    if reply_prefix(chat):
        return tokenizer.apply_chat_template(chat, tokenize=False, continue_final_message=True)
    return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)


def render_prompts(tokenizer: Any, requests: Sequence[ActionRequest]) -> list[str]:
    """Each request's chat messages through the model's chat template (:func:`render_chat`)."""
    return [render_chat(tokenizer, request.messages()) for request in requests]


def completion_text(prefix: str, decoded: str) -> str:
    """The action text of a completion: the reply's given start followed by what the model wrote, stripped (the
    continuation is kept as decoded, so an indented line right after a prefix keeps its indent)."""
    return (prefix + decoded).strip() if prefix else decoded.strip()


def encode_prompts(tokenizer: Any, prompts: Sequence[str], max_prompt_tokens: int) -> list[list[int]]:
    """Token ids per prompt. A prompt over ``max_prompt_tokens`` keeps its head (role, instruction, protocol) and its
    tail (latest draft, feedback and the assistant header) and loses the middle (the long task text) instead of
    failing the whole batch."""
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    kept = []
    for ids in encoded:
        if len(ids) > max_prompt_tokens:
            head = max_prompt_tokens // 2
            ids = ids[:head] + ids[len(ids) - (max_prompt_tokens - head):]
        kept.append(list(ids))
    return kept


def generate_actions(
    loaded: LoadedModel,
    requests: Sequence[ActionRequest],
    settings: GenerationSettings,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    model: Any = None,
    share_prefix: bool = True,
    prompt_store: PromptStore | None = None,
    reply_ends: Mapping[str, str | None] | None = None,
    role_max_new_tokens: Mapping[str, int] | None = None,
) -> list[str]:
    """Generate one completion per request with ``model`` (default ``loaded.model``), ``batch_size`` rows at a time.

    Rows are grouped by prompt length so padding stays small; results come back in request order. ``reply_ends``,
    ``role_max_new_tokens``: see :func:`generate_records`.
    """
    records = generate_records(loaded, requests, settings, batch_size=batch_size, model=model, logprobs=False,
                               share_prefix=share_prefix, prompt_store=prompt_store, reply_ends=reply_ends,
                               role_max_new_tokens=role_max_new_tokens)
    return [record.text for record in records]


def generate_records(
    loaded: LoadedModel,
    requests: Sequence[ActionRequest],
    settings: GenerationSettings,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    model: Any = None,
    logprobs: bool = True,
    share_prefix: bool = True,
    prompt_store: PromptStore | None = None,
    reply_ends: Mapping[str, str | None] | None = None,
    role_max_new_tokens: Mapping[str, int] | None = None,
) -> list[Generation]:
    """One :class:`Generation` per request: text, prompt ids, completion ids and (``logprobs=True``) per-token
    log-probabilities, in request order.

    ``prompt_ids`` are the unpadded ids the model saw (after :func:`encode_prompts` truncation); ``completion_ids`` run
    through the first stop token (included) and never contain the padding after a finished row. ``logprobs`` are
    ``log_softmax`` of the model's raw logits (temperature 1, no top-p) at each generated token: what a trainer's
    forward pass over prompt + completion recomputes, so the first policy-gradient ratio starts at 1 whatever
    temperature and top-p sampled the tokens. A chat ending in an ``assistant`` message is continued from it
    (:func:`render_chat`), and the record's text starts with that message's content.

    ``share_prefix`` (default): requests with the same prompt in one batch (the G samples of a group, several seeds of
    one task) are prefilled once and decoded in a static cache (:func:`llm_marl_baselines.decoding.sample_rows`); False
    runs ``model.generate`` on every row, the reference path (same samples for the same seed and rows, both drawn by
    :class:`~llm_marl_baselines.decoding.TopKSampler`: the tests check). ``prompt_store`` (with ``share_prefix``):
    a :class:`~llm_marl_baselines.prompt_store.PromptStore`; each prompt then prefills only what follows its longest
    prefix among the prompts prefilled before with the store, and is stored in turn (for fixed weights only).

    ``reply_ends``: per agent, a regular expression whose first match in the reply (its given start included) ends
    it, e.g. an env's ``suggested_reply_end(agent)``: a coder's reply stops where its code block closes instead of
    writing on to the budget. Such a reply is the start of what it would be without (same seed and rows), recorded
    with ``finish_reason`` ``"stop"``; agents without a pattern write as before.

    ``role_max_new_tokens``: per agent, a budget below ``settings.max_new_tokens`` at which its replies stop (a call
    that serves roles with different budgets, e.g. a coding verifier's 48 beside coders' 160); such a reply is the
    start of what it would be without (same seed and rows), recorded with ``finish_reason`` ``"length"``.
    """
    import torch

    model = loaded.model if model is None else model
    tokenizer = loaded.tokenizer
    context = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    max_prompt_tokens = max(16, context - settings.max_new_tokens)
    encoded = encode_prompts(tokenizer, render_prompts(tokenizer, requests), max_prompt_tokens)
    prefixes = [reply_prefix(request.messages()) for request in requests]
    tests = reply_end_tests(check_reply_ends(reply_ends), [request.agent for request in requests], prefixes)
    budgets = check_role_budgets(role_max_new_tokens, settings.max_new_tokens)
    limits = (None if not budgets
              else [budgets.get(request.agent, settings.max_new_tokens) for request in requests])
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    records: list[Generation | None] = [None] * len(encoded)
    # A private RNG state: seeding for this call must not reset the caller's global torch RNG.
    with torch.random.fork_rng(devices=[] if loaded.device == "cpu" else None):
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            stops = (None if tests is None
                     else RowTextStops(tuple(tests[i] for i in rows), token_texts(tokenizer)))
            batch = _generate_batch(loaded, model, [encoded[i] for i in rows], settings, logprobs, share_prefix,
                                    prompt_store, stops, None if limits is None else [limits[i] for i in rows])
            for row, record in zip(rows, batch, strict=True):
                records[row] = dataclasses.replace(record, text=completion_text(prefixes[row], record.text))
    return [record for record in records if record is not None]


def _generate_batch(loaded: LoadedModel, model: Any, encoded: list[list[int]], settings: GenerationSettings,
                    logprobs: bool, share_prefix: bool, prompt_store: PromptStore | None,
                    row_stops: RowTextStops | None = None, limits: list[int] | None = None) -> list[Generation]:
    """One batch of rows: a record per row, cut after its first stop token, where its stop test first holds or at
    its own budget in ``limits`` (text: the decoded continuation, not yet stripped or prefixed)."""
    stop_ids = sorted(stop_token_ids(model, loaded.tokenizer))
    pad_id = loaded.tokenizer.pad_token_id
    if share_prefix:
        distinct: dict[tuple[int, ...], int] = {}
        row_prompt = [distinct.setdefault(tuple(ids), len(distinct)) for ids in encoded]
        # On CUDA the decode steps replay captured graphs (llm_marl_baselines.graph_decode); the route key names the
        # adapter a peft model has active, so stored prompts of different adapters are never mixed either.
        graphs = decoder_for_active_adapter(model)
        sampled = sample_rows(model, [list(ids) for ids in distinct], row_prompt, temperature=settings.temperature,
                              top_p=settings.top_p, max_new_tokens=settings.max_new_tokens, stop_ids=stop_ids,
                              pad_id=pad_id, logprobs=logprobs, prompt_store=prompt_store, row_stops=row_stops,
                              row_max_new_tokens=limits,
                              prompt_keys=None if graphs is None else [graphs[1]] * len(distinct),
                              graphs=None if graphs is None else graphs[0])
        tokens, token_logprobs, stopped = sampled.tokens, sampled.logprobs, sampled.stopped
    else:
        tokens, token_logprobs, stopped = _generate_with_hf(loaded, model, encoded, settings, logprobs, stop_ids,
                                                            limits)
        if row_stops is not None:  # generate wrote every row on; each is cut where sample_rows would have ended it
            tokens, token_logprobs, stopped = cut_rows(row_stops, tokens, token_logprobs, stopped)
    return [
        Generation(
            text=loaded.tokenizer.decode(completion, skip_special_tokens=True),
            prompt_ids=tuple(encoded[row]),
            completion_ids=tuple(completion),
            logprobs=tuple(token_logprobs[row]) if token_logprobs is not None else None,
            finish_reason="stop" if stopped[row] else "length",
        )
        for row, completion in enumerate(tokens)
    ]


def _generate_with_hf(loaded: LoadedModel, model: Any, encoded: list[list[int]], settings: GenerationSettings,
                      logprobs: bool, stop_ids: list[int], limits: list[int] | None = None,
                      ) -> tuple[list[list[int]], list[list[float]] | None, list[bool]]:
    """The reference path: one left-padded ``model.generate`` call over every row, drawing its tokens with the
    sampler :func:`~llm_marl_baselines.decoding.sample_rows` uses (``generate`` itself runs greedy on the one token
    left finite), so both paths give the same samples for the same seed. ``limits``: per row, the budget it is cut at
    afterwards (``generate`` draws every row at every step, so the other rows are what they would be without)."""
    import torch
    from transformers import LogitsProcessorList

    tokenizer = loaded.tokenizer
    sampling: dict[str, Any] = {"do_sample": False}
    if not settings.greedy:
        sampler = TopKSampler(settings.temperature, settings.top_p)
        sampling["logits_processor"] = LogitsProcessorList([sampler.as_logits_processor()])
    batch = tokenizer.pad({"input_ids": encoded}, padding=True, return_tensors="pt")
    batch = {key: value.to(loaded.device) for key, value in batch.items()}
    with torch.inference_mode():
        # Every stop id ends generation (not only the model's own eos), so a row's text and ids end at the same place.
        output = model.generate(**batch, max_new_tokens=settings.max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                eos_token_id=stop_ids, return_dict_in_generate=True, output_logits=logprobs,
                                **sampling)
        new_tokens = output.sequences[:, batch["input_ids"].shape[1]:]
        step_logprobs = None
        if logprobs:
            # One (rows, vocab) step at a time: stacking all steps first would double the peak memory.
            step_logprobs = torch.stack([
                torch.log_softmax(step.float(), dim=-1).gather(-1, new_tokens[:, t:t + 1]).squeeze(-1)
                for t, step in enumerate(output.logits)
            ], dim=1).tolist()
    return end_rows(new_tokens.tolist(), step_logprobs, set(stop_ids), limits)


def end_rows(rows: list[list[int]], token_logprobs: list[list[float]] | None, stop_ids: Collection[int],
             limits: list[int] | None = None) -> tuple[list[list[int]], list[list[float]] | None, list[bool]]:
    """Rows ``generate`` wrote to the call's budget, each cut at its own budget in ``limits`` and then after its
    first stop id (kept, and the row marked stopped), with its log-probabilities cut alike: where
    :func:`~llm_marl_baselines.decoding.sample_rows` ends the same rows."""
    if limits is not None:
        rows = [tokens[:limit] for tokens, limit in zip(rows, limits, strict=True)]
    ends = [next((i for i, token in enumerate(tokens) if token in stop_ids), None) for tokens in rows]
    rows = [tokens if end is None else tokens[:end + 1] for tokens, end in zip(rows, ends, strict=True)]
    if token_logprobs is not None:
        token_logprobs = [values[:len(tokens)] for values, tokens in zip(token_logprobs, rows, strict=True)]
    return rows, token_logprobs, [end is not None for end in ends]


def cut_rows(row_stops: RowTextStops, tokens: list[list[int]], token_logprobs: list[list[float]] | None,
             stopped: list[bool]) -> tuple[list[list[int]], list[list[float]] | None, list[bool]]:
    """Rows sampled to their end, each cut where its stop test first holds (marked stopped there), as
    :func:`~llm_marl_baselines.decoding.sample_rows` ends them with the same tests."""
    lengths = row_stops.lengths(tokens)
    tokens = [row if n is None else row[:n] for row, n in zip(tokens, lengths, strict=True)]
    if token_logprobs is not None:
        token_logprobs = [row if n is None else row[:n] for row, n in zip(token_logprobs, lengths, strict=True)]
    return tokens, token_logprobs, [was or n is not None for was, n in zip(stopped, lengths, strict=True)]


def stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """The ids a reply stops at: the model's generation-config end ids and the tokenizer's end of sequence."""
    eos = model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    return ids | ({tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set())


class LocalModelPolicy(Policy):
    """A local transformers causal LM acting for every agent (one shared model; batched across requests).

    Args:
        model: a local folder, a hub id, or None for the offline default SmolLM2-135M-Instruct.
        dtype: ``"auto"`` (bf16 where the hardware supports it), ``"bfloat16"``, ``"float32"`` or ``"float16"``.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        batch_size: the most rows per ``generate`` call.
        loaded: an already loaded model to share (then ``model``/``dtype``/``device`` are ignored).
        share_prefix: prefill each distinct prompt of a batch once and decode in a static cache (default); False
            runs ``model.generate`` on every row (the reference path, for comparisons).
        reuse_prompts: keep recent prompts' keys and values (a :class:`~llm_marl_baselines.prompt_store.PromptStore`
            of ``prompt_store_bytes``, default 1 GiB) so that a prompt that begins like an earlier one (an
            episode's next turn) prefills only the rest (default; with ``share_prefix``). The weights never change
            here, so the store stays right; :attr:`prompt_store` is it (None when off). A reused prefix gives the
            logits of a full prefill up to rounding, so in bf16 a sampled token can differ: a fresh policy replays a
            fresh policy's calls exactly, but the same seeded call made twice on one policy may not (the second
            reads the first's prefixes). ``reuse_prompts=False`` makes every call replay exactly.
        prompt_store: a store to use instead of a new one (a caller that scopes reuse itself, as the study does
            per batch, passes its own; ``reuse_prompts`` is then ignored).
        logprobs: whether :meth:`generate`'s records carry per-token log-probabilities (default). False keeps the
            prompt and completion ids (token counts) without keeping the logits they need (rows x tokens x
            vocabulary of memory): what an evaluation that counts tokens wants.
        reply_ends: per agent, a regular expression whose first match ends that agent's replies (an env's
            ``suggested_reply_end``; :func:`generate_records`); None (default): every reply runs to a stop token or
            the budget.
        role_max_new_tokens: per agent, a budget (below the settings' ``max_new_tokens``) at which that agent's
            replies stop, e.g. an env's ``suggested_max_new_tokens([agent])``; None (default): every reply has the
            settings' budget.
    """

    name = "local"

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        dtype: str = "auto",
        device: str = "auto",
        batch_size: int = DEFAULT_BATCH_SIZE,
        loaded: LoadedModel | None = None,
        share_prefix: bool = True,
        reuse_prompts: bool = True,
        prompt_store_bytes: int = DEFAULT_MAX_BYTES,
        prompt_store: PromptStore | None = None,
        logprobs: bool = True,
        reply_ends: Mapping[str, str | None] | None = None,
        role_max_new_tokens: Mapping[str, int] | None = None,
    ) -> None:
        check_reply_ends(reply_ends)
        check_role_budgets(role_max_new_tokens, 1)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size: expected an int >= 1, got {batch_size!r}")
        if prompt_store is not None and not isinstance(prompt_store, PromptStore):
            raise TypeError(f"prompt_store: expected a PromptStore or None, got {type(prompt_store).__name__}")
        if not isinstance(logprobs, bool):
            raise TypeError(f"logprobs: expected True or False, got {logprobs!r}")
        self.loaded = loaded if loaded is not None else load_model(model, dtype=dtype, device=device)
        self.batch_size = batch_size
        self.share_prefix = bool(share_prefix)
        if prompt_store is not None and not self.share_prefix:
            raise ValueError("prompt_store needs share_prefix=True (prefixes are reused after the shared prefill)")
        if prompt_store is None and reuse_prompts and self.share_prefix:
            prompt_store = PromptStore(prompt_store_bytes)
        self.prompt_store = prompt_store
        self.logprobs = logprobs
        self.reply_ends = dict(reply_ends) if reply_ends is not None else None
        self.role_max_new_tokens = dict(role_max_new_tokens) if role_max_new_tokens is not None else None

    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        # Texts only: skips keeping the raw logits that log-probabilities need.
        return generate_actions(self.loaded, requests, settings, batch_size=self.batch_size,
                                share_prefix=self.share_prefix, prompt_store=self.prompt_store,
                                reply_ends=self.reply_ends, role_max_new_tokens=self.role_max_new_tokens)

    def _generate(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[Generation]:
        return generate_records(self.loaded, requests, settings, batch_size=self.batch_size, logprobs=self.logprobs,
                                share_prefix=self.share_prefix, prompt_store=self.prompt_store,
                                reply_ends=self.reply_ends, role_max_new_tokens=self.role_max_new_tokens)
