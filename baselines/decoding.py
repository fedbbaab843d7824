"""Sampling with each distinct prompt read once: one prefill per prompt, its KV cache copied to the prompt's rows,
then a lean decode loop over a static cache.

Why not ``model.generate``: on these CPUs a batch of G samples of one prompt is decode-bound, and ``generate`` spends
much of each decode step outside the model (input preparation, a cache that grows by ``torch.cat`` at every step, a
4-D mask rebuilt from a growing 2-D one); the G samples of a group also re-read their shared prompt G times in the
prefill. :func:`sample_rows` prefills every distinct prompt once, copies its keys and values to the rows that sample
from it (``index_select`` on the batch axis), and decodes all rows together in a preallocated
:class:`~transformers.StaticCache`, one forward of one token per row and step.

Sampling follows transformers': the warped distribution ``generate`` samples from with these settings (temperature,
top-k 50, top-p, ``softmax``; argmax when greedy; stop tokens suppressed until ``min_new_tokens``), drawn over each
row's top-k candidates (:class:`TopKSampler`) rather than the whole vocabulary, which is the same distribution at a
fraction of the cost; a finished row's token is the pad from then on, and once a quarter of the batch has finished
those rows leave it (their cache rows dropped: the model's work per step follows the rows still writing); the loop
stops when every row has met a stop token or the budget is spent. With the same seed and the same rows the samples are
those of the repeated path as long as the logits agree, which the tests check (next-token logits to 1e-4 in fp32;
seeded samples equal); greedy decoding gives ``generate``'s tokens, and sampled rows ``generate``'s distribution, not
its draws. ``benchmarks/trainer_step.py`` measures the step with and without it (``share_prefix``). The decode's
linear layers run weight-first (:func:`weight_first_linears`), the faster order for a few rows on CPUs; the prefill
keeps ``F.linear``.

Rows are routed by a caller-given context (``rows_context``): the team model runs each row under its agent's LoRA
adapter, the prefill's rows being the distinct prompts and the decode's rows the samples.

Across calls, a :class:`~llm_marl_baselines.prompt_store.PromptStore` (``prompt_store``) keeps each prefilled prompt's
keys and values: a later prompt that begins like a stored one (an episode's next turn, whose observation opens with
the same task text) prefills only the rest, and a head that several prompts of one call share beyond the store (the
task text both agents read) is prefilled once first. The prompts stay left-padded as without a store; the forward
reads the last positions that cover every prompt's new tokens, and the positions before them come from the store, so
the decode's cache is no wider than without one. (A first version put each prompt's new tokens after the longest
reused prefix of the batch; the gaps that left made the decode read more positions, and the study's first coding
turn, whose task texts differ in length, got slower.)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from llm_marl_baselines.graph_decode import DecodeSession, GraphDecoder
from llm_marl_baselines.prompt_store import PromptStore, StoredPrompt, common_prefix_length

DEFAULT_TOP_K = 50
"""transformers' default top-k, which ``generate`` applies when sampling (and so do we)."""

WEIGHT_FIRST_MAX_ROWS = 32
"""Up to this many rows per product, :func:`weight_first_linears` computes a linear layer as ``(W @ x.T).T``: on the
2-core AVX2 machine a decode step's forward of SmolLM2-135M (500-token prompts) was faster that way at 2 to 32 rows
(2 rows 1.67x, 8 rows 1.18x, 32 rows 1.14x), and at 48 and 64 rows within the machine's noise of about 8 %
(``benchmarks/sampling.py --linears``, docs/results/sampling-linears.json)."""

RowsContext = Callable[[Sequence[int]], contextlib.AbstractContextManager[dict[str, Any]]]
"""``rows_context(prompt_index_of_each_batch_row)`` is entered around each forward; it yields extra keyword arguments
for the model (e.g. peft's ``adapter_names``) and may route rows to adapters while it is open."""


@dataclass(frozen=True)
class SampledRows:
    """What :func:`sample_rows` returns, one entry per row, in row order."""

    tokens: list[list[int]]
    """The generated ids through the first stop token (included), nothing after it."""
    logprobs: list[list[float]] | None
    """``log_softmax`` of the raw logits (temperature 1, before any warper) at each generated token; None when not
    asked for."""
    stopped: list[bool]
    """Whether the row met a stop token or its stop test (False: the budget ran out)."""


RowStop = Callable[[str], bool]
"""A row's stop test: whether its continuation's text so far ends the row (e.g. "the reply's code block has closed":
:func:`llm_marl_baselines.policies.local.reply_end_tests`)."""


@functools.lru_cache(maxsize=8)
def token_texts(tokenizer: Any) -> Callable[[int], str]:
    """Each token id's text on its own (``tokenizer.decode([id])``), remembered per tokenizer across calls (a study
    decodes the same few hundred ids batch after batch): what :class:`RowTextStops` appends a step at a time. For a
    byte-level BPE (SmolLM2's) the pieces join to the decoded text but for a character split across tokens, which
    shows as U+FFFD until it is whole; a stop test looks for ASCII marks."""
    return functools.lru_cache(maxsize=None)(lambda token: tokenizer.decode([token]))


@dataclass(frozen=True)
class RowTextStops:
    """Per row, a stop test on the text of what the row has written so far (``None``: no test for that row); a row
    ends with the first token after which its test holds. :func:`sample_rows` applies it a step at a time and stops
    such a row there; a path that samples every row to its end (``generate``) cuts the rows afterwards
    (:meth:`lengths`), which gives the same tokens, since every row is drawn at every step either way."""

    tests: tuple[RowStop | None, ...]
    token_text: Callable[[int], str]
    """A token id's text on its own (:func:`token_texts`); a row's text is its tokens' texts joined."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", tuple(self.tests))
        if any(test is not None and not callable(test) for test in self.tests):
            raise TypeError("tests: expected a callable (text -> bool) or None per row")

    def lengths(self, rows: Sequence[Sequence[int]]) -> list[int | None]:
        """Per row of whole completions (one per test, in order): how many of its tokens to keep, through the token
        at which its test first holds (``None``: it never does)."""
        if len(rows) != len(self.tests):
            raise ValueError(f"rows: expected one per test ({len(self.tests)}), got {len(rows)}")
        kept: list[int | None] = []
        for test, row in zip(self.tests, rows, strict=True):
            text, length = "", None
            for i, token in enumerate(row if test is not None else ()):
                text += self.token_text(token)
                if test(text):
                    length = i + 1
                    break
            kept.append(length)
        return kept


@contextlib.contextmanager
def _no_routing(rows: Sequence[int]) -> Iterator[dict[str, Any]]:
    yield {}


def left_pad(encoded: Sequence[Sequence[int]], pad_id: int, device: str = "cpu") -> tuple[Tensor, Tensor]:
    """``(input_ids, attention_mask)`` of ``encoded`` rows, left-padded with ``pad_id`` to the longest."""
    width = max(len(ids) for ids in encoded)
    input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for i, ids in enumerate(encoded):
        if ids:
            input_ids[i, width - len(ids):] = torch.tensor(list(ids))
            attention_mask[i, width - len(ids):] = 1
    return input_ids.to(device), attention_mask.to(device)


class TopKSampler:
    """Draws the next token from the distribution ``generate``'s warpers give (temperature, top-k, top-p, softmax),
    working on each row's top-k logits only.

    ``generate`` masks the whole vocabulary, sorts it for top-p and lets ``torch.multinomial`` draw over it, which on
    CPU means one exponential variate per vocabulary entry: at 32 rows of SmolLM2's 49,152 entries that was 119 ms of
    a decode step of about 500 ms on 2 cores (this draw: 4 ms; ``benchmarks/sampling.py``). Here ``torch.topk``
    picks the k candidates first, and transformers' own temperature and top-p warpers run on those k values: the
    probabilities are those of the full-vocabulary path (the masked entries have probability 0 there), so the
    distribution is the same, but the random draws are not those of ``generate`` for the same seed. The one
    difference: ``generate``'s top-k keeps every logit tied with the k-th, this keeps k.
    """

    def __init__(self, temperature: float, top_p: float, top_k: int = DEFAULT_TOP_K) -> None:
        from transformers import TemperatureLogitsWarper, TopPLogitsWarper

        if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
            raise ValueError(f"expected temperature >= 0, 0 < top_p <= 1 and top_k >= 0, got {temperature}, "
                             f"{top_p}, {top_k}")
        self.greedy = temperature == 0
        self.top_k = top_k
        self._warpers: list[Any] = []
        if temperature not in (0, 1.0):  # a positive scale: the same top-k before or after it
            self._warpers.append(TemperatureLogitsWarper(temperature))
        if top_p < 1.0:
            self._warpers.append(TopPLogitsWarper(top_p))

    def candidates(self, scores: Tensor) -> tuple[Tensor, Tensor]:
        """``(probs, token_ids)``, each ``(rows, k)``: the warped distribution over each row's candidates (a row's
        other tokens have probability 0). ``scores``: ``(rows, vocab)`` logits after any processor (e.g. min-length)."""
        if self.top_k:
            values, token_ids = torch.topk(scores, min(self.top_k, scores.shape[-1]), dim=-1)
        else:
            values, token_ids = torch.sort(scores, dim=-1, descending=True)
        for warper in self._warpers:  # neither warper reads the input ids
            values = warper(None, values)
        return torch.softmax(values, dim=-1), token_ids

    def __call__(self, scores: Tensor) -> Tensor:
        """One token id per row: argmax when greedy, else a draw from :meth:`candidates`."""
        if self.greedy:
            return scores.argmax(dim=-1)
        probs, token_ids = self.candidates(scores)
        return token_ids.gather(1, torch.multinomial(probs, num_samples=1)).squeeze(1)

    def as_logits_processor(self) -> Callable[[Tensor, Tensor], Tensor]:
        """A logits processor for a *greedy* ``model.generate`` that makes it sample as :func:`sample_rows` does: it
        draws each row's token with this sampler and leaves only that token finite, so ``generate``'s argmax takes it
        and both paths use the random stream alike (the same draws for the same seed and logits). Put it last."""

        def draw(input_ids: Tensor, scores: Tensor) -> Tensor:
            token = self(scores)
            return torch.full_like(scores, float("-inf")).scatter_(1, token[:, None], 0.0)

        return draw


@contextlib.contextmanager
def weight_first_linears(model: Any, max_rows: int = WEIGHT_FIRST_MAX_ROWS) -> Iterator[int]:
    """While open, every plain ``torch.nn.Linear`` of ``model`` on CPU computes ``y = (W @ x.T).T`` instead of
    ``x @ W.T`` for inputs of 2 to ``max_rows`` rows with gradients off; yields how many layers it changed.

    Why: a decode step multiplies each weight by a few rows. For that shape MKL's ``sgemm`` as ``F.linear`` calls it
    (the rows first) runs far below the cores' speed on the AVX2 CPUs measured here, while the same product with the
    weight as the first operand made a decode step up to 1.7x faster (``benchmarks/sampling.py --linears``). It is
    the same product, summed in another order: logits differ by rounding (under 1e-4 in the tests) or not at all.
    One row (a matrix-vector product), more than ``max_rows`` rows (the prefill), gradients (training) and other
    devices keep ``F.linear``. Layers whose ``forward`` is already replaced on the instance (e.g. by accelerate's
    hooks) and subclasses of ``Linear`` (quantized layers) are left alone; PEFT's LoRA layers call their base
    ``Linear``, which is changed.
    """
    changed = []
    for module in model.modules():
        if (type(module) is torch.nn.Linear and "forward" not in module.__dict__
                and module.weight.device.type == "cpu"):
            module.forward = functools.partial(_weight_first_forward, module, max_rows)
            changed.append(module)
    try:
        yield len(changed)
    finally:
        for module in changed:
            del module.forward


def _weight_first_forward(module: torch.nn.Linear, max_rows: int, x: Tensor) -> Tensor:
    weight = module.weight
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    if not 2 <= rows <= max_rows or torch.is_grad_enabled() or x.dtype != weight.dtype:
        return torch.nn.functional.linear(x, weight, module.bias)
    out = torch.mm(weight, x.reshape(rows, x.shape[-1]).t()).t()
    if module.bias is not None:
        out = out + module.bias
    return out.contiguous().view(*x.shape[:-1], weight.shape[0])


def sample_rows(
    model: Any,
    prompts: Sequence[Sequence[int]],
    row_prompt: Sequence[int],
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    stop_ids: Sequence[int],
    pad_id: int,
    min_new_tokens: int = 0,
    row_max_new_tokens: Sequence[int] | None = None,
    row_stops: RowTextStops | None = None,
    logprobs: bool = True,
    share_prefix: bool = True,
    cache: str = "static",
    rows_context: RowsContext | None = None,
    sampler: Callable[[Tensor], Tensor] | None = None,
    weight_first: bool = True,
    compact: bool = True,
    prompt_store: PromptStore | None = None,
    prompt_keys: Sequence[Hashable] | None = None,
    graphs: GraphDecoder | None = None,
) -> SampledRows:
    """Sample one completion per row; row ``r`` continues ``prompts[row_prompt[r]]`` (token ids, unpadded).

    ``share_prefix``: prefill each distinct prompt once and copy its cache to its rows (False: prefill every row, the
    same work ``generate`` does; for comparisons and tests). ``cache``: ``"static"`` (a preallocated
    :class:`~transformers.StaticCache`, the faster decode here) or ``"dynamic"``. ``sampler``: draws one token id per
    row from the ``(rows, vocab)`` logits (after the minimum-length processor); default ``TopKSampler(temperature,
    top_p)``, another for comparisons (``benchmarks/sampling.py`` times generate's whole-vocabulary draw here).
    ``weight_first``: decode under :func:`weight_first_linears` (False: ``F.linear`` throughout, for comparisons).
    ``row_max_new_tokens``: per row, the most new tokens it may take (each from 1 to ``max_new_tokens``; e.g. its
    role's budget in a batch of roles with different ones): a row that reaches its own ends there, recorded as cut by
    its budget (``stopped`` False). The other rows sample what they would without it, since every row is drawn at
    every step, and a row cut short holds the first tokens of what it would have written.
    ``row_stops``: per row, a test on its text so far (:class:`RowTextStops`); a row whose test holds ends with that
    token (``stopped`` True), with the first tokens of what it writes without the test, as a budget cuts it.
    ``compact``: drop finished rows from the batch once a quarter of it has finished (:func:`_worth_compacting`; False:
    every row runs to the last step, for comparisons); the samples are the same either way up to the logits' rounding.
    ``prompt_store`` (with ``share_prefix``): a :class:`~llm_marl_baselines.prompt_store.PromptStore` of earlier
    prompts' keys and values; each prompt prefills only what follows its longest prefix stored under its
    ``prompt_keys`` entry (what routes it, e.g. its adapter's name; default ``None`` for every prompt), and every
    prompt prefilled here is stored. The logits are the same up to rounding (the tests check). Draws from torch's
    current RNG (seed it around the call for reproducible samples). Runs under ``torch.inference_mode``.
    """
    from transformers import MinNewTokensLengthLogitsProcessor

    if not prompts or any(len(ids) == 0 for ids in prompts):
        raise ValueError("prompts: expected at least one prompt, each with at least one token")
    if not row_prompt or min(row_prompt) < 0 or max(row_prompt) >= len(prompts):
        raise ValueError(f"row_prompt: expected indices into {len(prompts)} prompts, got {list(row_prompt)[:8]}...")
    if cache not in ("static", "dynamic"):
        raise ValueError(f"cache: expected 'static' or 'dynamic', got {cache!r}")
    if prompt_keys is not None and len(prompt_keys) != len(prompts):
        raise ValueError(f"prompt_keys: expected one per prompt ({len(prompts)}), got {len(prompt_keys)}")
    if graphs is not None and not share_prefix:
        raise ValueError("graphs: decoding with a GraphDecoder needs share_prefix=True")
    if row_max_new_tokens is not None:
        row_max_new_tokens = list(row_max_new_tokens)
        if len(row_max_new_tokens) != len(row_prompt):
            raise ValueError(f"row_max_new_tokens: expected one per row ({len(row_prompt)}), "
                             f"got {len(row_max_new_tokens)}")
        if any(isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= max_new_tokens
               for n in row_max_new_tokens):
            raise ValueError(f"row_max_new_tokens: expected ints from 1 to max_new_tokens ({max_new_tokens}), got "
                             f"{row_max_new_tokens[:8]}...")
    if row_stops is not None:
        if not isinstance(row_stops, RowTextStops):
            raise TypeError(f"row_stops: expected RowTextStops, got {type(row_stops).__name__}")
        if len(row_stops.tests) != len(row_prompt):
            raise ValueError(f"row_stops: expected a test (or None) per row ({len(row_prompt)}), "
                             f"got {len(row_stops.tests)}")
    route = rows_context or _no_routing
    device = next(model.parameters()).device
    rows = torch.tensor(list(row_prompt), dtype=torch.long, device=device)
    n_rows = len(row_prompt)
    stop = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    sampler = sampler or TopKSampler(temperature, top_p)
    cache_arg = cache_keyword(model)
    session: DecodeSession | None = None
    with torch.inference_mode():
        if share_prefix:
            keys = list(prompt_keys) if prompt_keys is not None else [None] * len(prompts)
            prefill_kv, prompt_ids, prompt_mask, logits = _prefill_reusing(
                model, prompts, keys, prompt_store, route, pad_id, str(device), cache_arg)
            width = prompt_ids.shape[1]
            positions = (prompt_mask.cumsum(dim=1) - 1).clamp(min=0)
            logits = logits.index_select(0, rows)
            prompt_mask, positions = prompt_mask.index_select(0, rows), positions.index_select(0, rows)
            if graphs is not None:
                session = graphs.start(prefill_kv, rows, prompt_mask, positions, max_new_tokens,
                                       [graphs.slot_of(keys[p]) for p in row_prompt])
                kv, compact, weight_first = None, False, False
            else:
                kv = new_cache(model, cache, width + max_new_tokens)
                _copy_rows(prefill_kv, kv, rows, width)
            del prefill_kv
            prompt_ids = prompt_ids.index_select(0, rows)
        else:  # every row prefills its own copy of its prompt, straight into the decode's cache
            prompt_ids, prompt_mask = left_pad([prompts[i] for i in row_prompt], pad_id, str(device))
            width = prompt_ids.shape[1]
            positions = (prompt_mask.cumsum(dim=1) - 1).clamp(min=0)
            kv = new_cache(model, cache, width + max_new_tokens)
            with route(list(row_prompt)) as extra:
                out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions,
                            logits_to_keep=1, **{cache_arg: kv}, **extra)
            logits = out.logits[:, -1].float()
            del out
        min_tokens = (MinNewTokensLengthLogitsProcessor(width, min_new_tokens, stop.tolist(), device=device)
                      if min_new_tokens > 0 else None)
        sequences = torch.full((n_rows, width + max_new_tokens), pad_id, dtype=torch.long, device=device)
        sequences[:, :width] = prompt_ids
        mask = torch.cat([prompt_mask, prompt_mask.new_ones((n_rows, max_new_tokens))], dim=1)
        next_position = positions[:, -1:] + 1
        unfinished = torch.ones(n_rows, dtype=torch.bool, device=device)
        row_limits = (None if row_max_new_tokens is None
                      else torch.tensor(row_max_new_tokens, dtype=torch.long, device=device))
        active = torch.arange(n_rows, device=device)  # the rows the cache still holds, in row order
        tested = ([] if row_stops is None else [r for r, test in enumerate(row_stops.tests) if test is not None])
        texts = dict.fromkeys(tested, "")  # each tested row's text so far
        text_ended: dict[int, int] = {}  # row -> tokens it keeps, for rows ended by their stop test
        recorded: list[Tensor] = []
        steps = 0
        linears = weight_first_linears(model) if weight_first else contextlib.nullcontext()
        with linears, contextlib.ExitStack() as routing:
            # The graph decoder routes rows by its own slots; the model's routing is for the prefill only.
            extra = routing.enter_context(route(list(row_prompt))) if session is None else {}
            for t in range(max_new_tokens):
                # Every row is drawn, finished or not (a finished row's logits are stale, its token the pad), so the
                # random stream is used as generate uses it whichever rows the cache still holds.
                if logprobs:
                    log_p = torch.log_softmax(logits, dim=-1)
                scores = logits
                if min_tokens is not None:
                    scores = min_tokens(sequences[:, :width + t], scores)
                token = sampler(scores)
                token = torch.where(unfinished, token, torch.full_like(token, pad_id))
                if logprobs:
                    recorded.append(log_p.gather(1, token[:, None]).squeeze(1))
                sequences[:, width + t] = token
                steps = t + 1
                unfinished &= ~torch.isin(token, stop)
                if tested:
                    drawn, open_rows = token.tolist(), unfinished.tolist()
                    for r in tested:
                        if not open_rows[r]:  # ended before, or by this token's stop id
                            continue
                        texts[r] += row_stops.token_text(drawn[r])
                        if row_stops.tests[r](texts[r]):
                            text_ended[r] = steps
                            unfinished[r] = False
                if row_limits is not None:
                    unfinished &= row_limits > steps
                if not bool(unfinished.any()) or steps == max_new_tokens:
                    break
                still = unfinished.index_select(0, active)
                if compact and _worth_compacting(int(still.sum()), len(active)):
                    keep = still.nonzero().squeeze(1)
                    kept = new_cache(model, cache, width + max_new_tokens)
                    _copy_rows(kv, kept, keep, width + t)
                    kv = kept
                    mask, next_position = mask.index_select(0, keep), next_position.index_select(0, keep)
                    active = active.index_select(0, keep)
                    routing.close()  # the rows' routing (e.g. their adapters) follows them
                    extra = routing.enter_context(route([row_prompt[r] for r in active.tolist()]))
                if session is not None:
                    logits = session.step(token)
                    continue
                out = model(input_ids=token.index_select(0, active)[:, None], attention_mask=mask[:, :width + t + 1],
                            position_ids=next_position + t, logits_to_keep=1, **{cache_arg: kv}, **extra)
                step_logits = out.logits[:, -1].float()
                logits = step_logits if len(active) == n_rows else logits.index_copy(0, active, step_logits)
        new_tokens = sequences[:, width:width + steps].tolist()
        token_logprobs = torch.stack(recorded, dim=1).tolist() if logprobs else None
    stop_set = set(stop.tolist())
    tokens, kept_logprobs, stopped = [], [], []
    for r, row in enumerate(new_tokens):
        if row_max_new_tokens is not None:
            row = row[:row_max_new_tokens[r]]  # what follows is padding, which may be a stop id
        if r in text_ended:
            row = row[:text_ended[r]]
        end = next((i for i, token in enumerate(row) if token in stop_set), None)
        length = len(row) if end is None else end + 1
        tokens.append(row[:length])
        stopped.append(end is not None or r in text_ended)
        if token_logprobs is not None:
            kept_logprobs.append(token_logprobs[r][:length])
    return SampledRows(tokens, kept_logprobs if logprobs else None, stopped)


def _prefill_reusing(model: Any, prompts: Sequence[Sequence[int]], route_keys: Sequence[Hashable],
                     store: PromptStore | None, route: RowsContext, pad_id: int, device: str,
                     cache_arg: str) -> tuple[Any, Tensor, Tensor, Tensor]:
    """Prefill each prompt once: ``(dynamic cache, left-padded ids, mask, next-token logits)``, a row per prompt.

    With a ``store``: the prefixes that two or more of these prompts share beyond what the store holds (a task text
    every agent's prompt starts with) are prefilled once each and stored first, when that makes the two forwards read
    fewer positions than one (see :func:`_prefill`); then every prompt is prefilled from its stored prefix on, and
    stored whole."""
    every = list(range(len(prompts)))
    if store is None:
        return _prefill(model, prompts, every, route_keys, None, route, pad_id, device, cache_arg)
    heads = _shared_heads(model, prompts, route_keys, store)
    if heads:
        stored = [store.longest_prefix(model, key, ids)[1] for key, ids in zip(route_keys, prompts, strict=True)]
        window = max(len(ids) - n for ids, n in zip(prompts, stored, strict=True))
        window_after = max(len(ids) - max(n, heads.get(i, 0))
                           for i, (ids, n) in enumerate(zip(prompts, stored, strict=True)))
        heads_window = max(length - stored[i] for i, length in heads.items())
        distinct = {(route_keys[i], tuple(prompts[i][:length])): i for i, length in heads.items()}
        if len(distinct) * heads_window + len(prompts) * window_after < len(prompts) * window:
            rows = list(distinct.values())
            _prefill(model, [prompts[i][:heads[i]] for i in rows], rows, [route_keys[i] for i in rows], store,
                     route, pad_id, device, cache_arg)
    result = _prefill(model, prompts, every, route_keys, store, route, pad_id, device, cache_arg)
    store.prompt_tokens += sum(len(ids) for ids in prompts)
    return result


def _prefill(model: Any, prompts: Sequence[Sequence[int]], prompt_rows: list[int], route_keys: Sequence[Hashable],
             store: PromptStore | None, route: RowsContext, pad_id: int, device: str,
             cache_arg: str) -> tuple[Any, Tensor, Tensor, Tensor]:
    """One prefill forward over ``prompts``, left-padded (routed as the caller's prompts ``prompt_rows``).

    With a ``store`` the forward reads only the last ``window`` positions, the fewest that hold every prompt's tokens
    after its longest stored prefix; each row's positions before them are copied from its stored prompt (a row whose
    stored prefix is longer than that reads a few stored tokens again). So the cache has the prompts' own width and no
    gaps, and the decode after it reads no more than without a store. Then every prompt is stored."""
    ids, mask = left_pad(prompts, pad_id, device)
    width = ids.shape[1]
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    found: list[tuple[StoredPrompt | None, int]] = [(None, 0)] * len(prompts)
    if store is not None:
        found = [store.longest_prefix(model, key, p) for key, p in zip(route_keys, prompts, strict=True)]
    window = max(len(p) - n for p, (_, n) in zip(prompts, found, strict=True))
    head = width - window
    kv = new_cache(model, "dynamic", width)
    if head:  # the stored prefixes go in first; the forward reads only what follows them
        _lay_prefixes(kv, [(entry, max(0, len(p) - window)) for p, (entry, _) in zip(prompts, found, strict=True)],
                      head)
    with route(prompt_rows) as extra:
        out = model(input_ids=ids[:, head:], attention_mask=mask, position_ids=positions[:, head:], logits_to_keep=1,
                    **{cache_arg: kv}, **extra)
    if store is not None:
        _store_prompts(store, model, route_keys, prompts, kv, mask)
        store.prefilled_tokens += sum(min(len(p), window) for p in prompts)
    return kv, ids, mask, out.logits[:, -1].float()


def _shared_heads(model: Any, prompts: Sequence[Sequence[int]], route_keys: Sequence[Hashable],
                  store: PromptStore) -> dict[int, int]:
    """``{prompt index: head length}`` for the prompts with a prefix worth prefilling once before them: the longest
    prefix a prompt shares with another prompt of the same route key (sorted prompts: a prompt's longest common
    prefix is with a neighbour), where that is at least ``store.min_tokens`` beyond what the store holds."""
    by_key: dict[Hashable, list[int]] = {}
    for index, key in enumerate(route_keys):
        by_key.setdefault(key, []).append(index)
    heads: dict[int, int] = {}
    for key, members in by_key.items():
        members.sort(key=lambda i: tuple(prompts[i]))
        shared = [0] * len(members)
        for a, b in itertools.pairwise(range(len(members))):
            common = common_prefix_length(prompts[members[a]], prompts[members[b]])
            shared[a], shared[b] = max(shared[a], common), max(shared[b], common)
        for position, index in enumerate(members):
            length = min(shared[position], len(prompts[index]) - 1)
            # The lookup leaves a prompt's last token to prefill; a placeholder token after the head lets it match
            # the whole head (-1 is no token id, so nothing stored matches past it).
            if length >= store.min_tokens and length >= store.longest_prefix(
                    model, key, (*prompts[index][:length], -1))[1] + store.min_tokens:
                heads[index] = length
    return heads


def _lay_prefixes(cache: Any, reused: Sequence[tuple[StoredPrompt | None, int]], width: int) -> None:
    """Fill an empty dynamic ``cache`` with ``width`` positions per row: the first ``n`` positions of row ``i``'s
    stored prompt (``reused[i] = (entry, n)``), right-aligned; zeros before them (padding, masked)."""
    from transformers.cache_utils import DynamicLayer

    sample = next(entry for entry, _ in reused if entry is not None)
    for index, layer in enumerate(cache.layers):
        if type(layer) is not DynamicLayer:
            raise NotImplementedError(f"cannot lay stored prefixes into a {type(layer).__name__} cache layer; "
                                      "sample this model without a prompt store")
        like = sample.keys[index]
        keys = like.new_zeros((len(reused), like.shape[0], width, like.shape[-1]))
        values = sample.values[index].new_zeros(keys.shape[:-1] + sample.values[index].shape[-1:])
        for row, (entry, n) in enumerate(reused):
            if entry is not None and n > 0:
                keys[row, :, width - n:] = entry.keys[index][:, :n]
                values[row, :, width - n:] = entry.values[index][:, :n]
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values


def _store_prompts(store: PromptStore, model: Any, route_keys: Sequence[Hashable], prompts: Sequence[Sequence[int]],
                   cache: Any, mask: Tensor) -> None:
    """Put each prefilled prompt's keys and values (its unmasked positions, in order) in ``store``."""
    for row, (key, ids) in enumerate(zip(route_keys, prompts, strict=True)):
        positions = mask[row].nonzero().squeeze(1)
        store.put(model, key, ids, [layer.keys[row].index_select(1, positions) for layer in cache.layers],
                  [layer.values[row].index_select(1, positions) for layer in cache.layers])


def _worth_compacting(unfinished: int, batch: int) -> bool:
    """Whether to drop the finished rows from a decode batch of ``batch`` rows of which ``unfinished`` still run.

    Copying the kept rows' cache cost 23 to 31 ms for 14 to 24 rows of about 100 positions, a tenth of a decode step
    there, and it grows with the positions held; each later step saves the finished rows' share of the model's work,
    which on 2 AVX2 cores is a few ms a row (``benchmarks/sampling.py --compaction``: 1.07x on 32 rows of which 54 %
    of row-steps wrote a token). Waiting for a quarter of the batch keeps the copies to a handful per call.
    """
    finished = batch - unfinished
    return finished >= max(2, batch // 4)


def cache_keyword(model: Any) -> str:
    """The keyword by which ``model``'s forward takes a KV cache: ``cache`` in the transformers versions that renamed
    it (``past_key_values`` is deprecated there), ``past_key_values`` in those before (where an unknown ``cache=``
    would fall silently into ``**kwargs`` and the model would run without its cache). PEFT wrappers are looked
    through to the model they wrap."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _cache_keyword_of(type(base))


@functools.cache
def _cache_keyword_of(model_class: type) -> str:
    parameters = inspect.signature(model_class.forward).parameters
    if "cache" in parameters:
        return "cache"
    if "past_key_values" in parameters:
        return "past_key_values"
    raise TypeError(f"{model_class.__name__}.forward takes neither 'cache' nor 'past_key_values': "
                    "no KV cache can be passed to it")


def new_cache(model: Any, kind: str = "dynamic", length: int = 0) -> Any:
    """An empty KV cache for ``model`` (PEFT wrappers looked through): ``"dynamic"`` grows as it is filled,
    ``"static"`` holds ``length`` positions."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    from transformers import DynamicCache, StaticCache

    config = base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config
    if kind == "static":
        return StaticCache(config=config, max_cache_len=length)
    if kind != "dynamic":
        raise ValueError(f"kind: expected 'dynamic' or 'static', got {kind!r}")
    return DynamicCache(config=config)


def _copy_rows(source: Any, target: Any, rows: Tensor, width: int) -> None:
    """Fill ``target`` (a fresh, empty cache) with the first ``width`` positions of ``source``'s batch rows ``rows``,
    in that order (``index_select`` on the batch axis; a static layer's later positions stay zeros). Used for the
    prefill (each row gets its prompt's keys and values) and to drop finished rows from a decode batch."""
    from transformers.cache_utils import DynamicLayer, StaticLayer

    for src, dst in zip(source.layers, target.layers, strict=True):
        keys = src.keys[:, :, :width].index_select(0, rows)
        values = src.values[:, :, :width].index_select(0, rows)
        if type(dst) is StaticLayer:
            dst.lazy_initialization(keys, values)
            dst.keys[:, :, :width].copy_(keys)
            dst.values[:, :, :width].copy_(values)
            dst.cumulative_length.fill_(width)
        elif type(dst) is DynamicLayer:
            dst.lazy_initialization(keys, values)
            dst.keys, dst.values = keys, values
        else:  # sliding-window or other layer kinds keep state this copy does not know how to carry
            raise NotImplementedError(f"cannot copy rows of a {type(dst).__name__} cache layer; use "
                                      "share_prefix=False and compact=False for this model")
