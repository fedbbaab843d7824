"""A decode step that is not launch-bound on a GPU: the whole step of a batch (every row under its own LoRA adapter)
captured once as a CUDA graph and replayed at every token.

Why: a 135M model's decode step is microseconds of arithmetic on an H100 or H200, but the eager step launches one
kernel per operation per layer (about 20 per layer, 30 layers, plus the per-row LoRA products), and Python runs
between them: the GPU checks in ``docs/results/gpu-check-*`` found the trainer's step generation-bound (the writing-2
recipe 13.9 of 16.1 s, coding-2 24.9 of 27.7 s). A replayed graph launches the step's kernels as one unit.

What is captured (:meth:`GraphDecoder.start` and :meth:`DecodeSession.step`): one token per row through the model, a
functional copy of the Llama decoder layer (the model's own norms, rotary embedding, weights and activation, our
attention over a static key/value buffer) written so that every tensor it reads lives at a fixed address:

- the rows' input tokens, positions, the write position and a boolean attention mask over the whole buffer;
- per layer, keys and values ``[rows, kv_heads, length, head_dim]`` (the prompts' keys and values are copied in from
  the eager prefill; each step writes its own at the write position with ``index_copy_``);
- per LoRA layer, every adapter's ``A`` and ``B·scaling`` stacked ``[adapters + 1, ...]`` (the last slot zeros: the
  base model), gathered per row inside the graph from a row→slot buffer, so one graph serves any mix of agents and
  the adapters' current weights (refreshed by ``copy_`` at every :meth:`GraphDecoder.start`, so training's updates
  are seen).

Why a step of our own rather than transformers' forward captured as it is: its mask creation reads the mask on the
host (``masking_utils``: ``padding_mask.all()``), which a capture cannot hold, and the step here reads only buffers at
fixed addresses; it also runs uncaptured on a CPU, where the tests compare it with the model's own forward.

Graphs are keyed by shape: rows rounded up to a bucket (1, 2, 4, ... 64, then multiples of 64; spare rows repeat
row 0 and are dropped) and the buffer length rounded up to a multiple of :data:`LENGTH_STEP`; the least recently
used graph is dropped past :attr:`GraphDecoder.max_graphs`. Grouped-query attention reads each key/value head once:
a decode step's query heads that share a key/value head are the rows of one attention call (exact, the query length
being 1).

The sampler stays eager (about a dozen kernels a step, against the ~700 of the model's step), so the draws are those
of :func:`~llm_marl_baselines.decoding.sample_rows`' eager path for the same logits; the logits are the eager
forward's up to floating-point rounding (the tests compare both on CPU, where the same step runs uncaptured, and
``benchmarks/trainer_step.py`` on a GPU). Finished rows stay in the batch (on a GPU a dropped row saves nothing the
launch overhead does not already cost).

``compile=True`` (the trainer's ``graph_compile``) also compiles the step with ``torch.compile`` (Inductor, one graph
per shape, no graph breaks allowed) before it is captured: the captured step is then Inductor's fused kernels (the
norms', rotary embedding's, LoRA gathers' and residual adds' element-wise work in a few kernels a layer) and the
matrix products, rather than about 60 kernels a layer. Compiling costs tens of seconds per shape the first time, so it
pays on training runs and long studies, not on a short call; it is off by default. Where compiling fails the decoder
warns and runs the step uncompiled (``DecodeStats.compile_error`` says why).

Supported: Llama-architecture decoders (SmolLM2, Llama) with plain or peft-LoRA linear layers (no DoRA, no LoRA bias:
what the team model's stacked routing supports too). :func:`supports` says whether a model is; other models keep the
eager path.
"""

from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from llm_marl_baselines.lora_layers import has_plain_adapters, is_lora_layer, stacked_adapters

LENGTH_STEP = 256
"""The key/value buffer's length is rounded up to a multiple of this (fewer distinct graphs; the extra positions are
masked)."""
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
"""Batch sizes graphs are captured at; larger batches round up to a multiple of 64."""
SUPPORTED_ATTENTION = ("LlamaAttention",)
"""The attention classes whose decode step :class:`GraphDecoder` reproduces."""


def supports(model: Any) -> bool:
    """Whether :class:`GraphDecoder` can run ``model`` (a Llama-architecture causal LM, or a peft model around one,
    whose LoRA layers are plain)."""
    base = _base_model(model)
    inner = getattr(base, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or getattr(base, "lm_head", None) is None or not len(layers):
        return False
    for layer in layers:
        attention = getattr(layer, "self_attn", None)
        if type(attention).__name__ not in SUPPORTED_ATTENTION or not hasattr(layer, "mlp"):
            return False
        if any(not _plain_lora(module) for module in _projections(layer)):
            return False
    return _plain_lora(base.lm_head)


def row_bucket(rows: int) -> int:
    """The captured batch size that holds ``rows`` rows."""
    for bucket in ROW_BUCKETS:
        if rows <= bucket:
            return bucket
    step = ROW_BUCKETS[-1]
    return -(-rows // step) * step


@dataclass
class _Graph:
    """One captured step: its static buffers and (on CUDA) the graph that replays it."""

    rows: int
    length: int
    tokens: Tensor
    positions: Tensor
    write_at: Tensor
    mask: Tensor
    row_slots: Tensor
    keys: list[Tensor]
    values: list[Tensor]
    logits: Tensor | None = None
    graph: Any = None
    compiled: bool = False
    """Whether the compiled step has run at this shape (its first run compiles)."""


@dataclass
class DecodeStats:
    """What a decoder has done, for benchmarks: steps replayed, graphs captured and the bytes a step must read."""

    steps: int = 0
    row_steps: int = 0
    captures: int = 0
    bytes_read: int = 0
    """Sum over steps of the weights' bytes plus the keys and values the step's attention reads (the whole buffer of
    the captured rows): a lower bound on the memory traffic, so ``bytes_read / bandwidth`` is the step's floor."""
    shapes: dict[str, int] = field(default_factory=dict)
    capture_error: str | None = None
    """Why capturing failed, where it did (the decoder then runs uncaptured, with a warning)."""
    compiled: bool = False
    """Whether the step runs through ``torch.compile`` (asked for, and not fallen back from)."""
    compile_error: str | None = None
    """Why compiling failed, where it did (the decoder then runs the step uncompiled, with a warning)."""
    compile_s: float = 0.0
    """Seconds spent in the steps that compiled a shape (the first warm-up step of each), compiling included."""


class GraphDecoder:
    """Decode steps of one model, captured as CUDA graphs (``capture=True``, the default on CUDA) or run eagerly
    (``capture=False``: the same step uncaptured, for CPUs and tests).

    ``adapters``: the LoRA adapter names of ``model`` that rows may run under, in slot order (a prompt's route key,
    see :meth:`start`, names its adapter; ``None`` runs the base model). A model without LoRA layers takes none.
    ``compile``: run the step through ``torch.compile`` (see the module docstring); ``compile_backend`` names its
    backend (``"inductor"``; the tests take ``"aot_eager"``, which traces the same graph without generating code).
    """

    def __init__(self, model: Any, adapters: Sequence[str] = (), *, capture: bool | None = None,
                 max_graphs: int = 8, compile: bool = False, compile_backend: str = "inductor") -> None:
        if not supports(model):
            raise ValueError(f"GraphDecoder: {type(_base_model(model)).__name__} is not a supported architecture "
                             f"(attention {SUPPORTED_ATTENTION}, plain or LoRA linear layers); sample it eagerly")
        self.model = model
        base = _base_model(model)
        self._base = base
        self._layers = list(base.model.layers)
        device = base.lm_head.weight.device
        self.device = device
        self.capture = device.type == "cuda" if capture is None else bool(capture)
        if self.capture and device.type != "cuda":
            raise ValueError(f"GraphDecoder: capture=True needs a CUDA model, got one on {device}")
        self.adapters = tuple(adapters)
        self._slot = {name: i for i, name in enumerate(self.adapters)}
        self.base_slot = len(self.adapters)
        """The slot of the base model (zero LoRA weights)."""
        lora_modules = [module for module in base.modules() if is_lora_layer(module)]
        missing = sorted({name for module in lora_modules for name in self.adapters if name not in module.lora_A}
                         - {name for module in lora_modules for name in module.lora_A})
        if missing:
            raise ValueError(f"GraphDecoder: no LoRA adapter named {missing} in the model")
        if lora_modules and not self.adapters:
            raise ValueError("GraphDecoder: the model has LoRA layers; name the adapters rows may run under")
        # Per LoRA layer, every adapter's A and B·scaling in slot order and a last slot of zeros (the base model):
        # buffers at fixed addresses, which the captured step reads and _refresh_stacks overwrites.
        self._stacks: dict[int, tuple[Any, Tensor, Tensor]] = {}
        with torch.no_grad():
            for module in lora_modules:
                a, b = stacked_adapters(module, self.adapters)
                self._stacks[id(module)] = (module, torch.cat([a, torch.zeros_like(a[:1])]),
                                            torch.cat([b, torch.zeros_like(b[:1])]))
        self._graphs: OrderedDict[tuple[int, int], _Graph] = OrderedDict()
        self.max_graphs = max_graphs
        self._pool = torch.cuda.graph_pool_handle() if self.capture else None
        self._weight_bytes = sum(p.numel() * p.element_size() for p in base.parameters()
                                 if p is not base.model.embed_tokens.weight or p is base.lm_head.weight)
        self.stats = DecodeStats()
        config = base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config
        attention = self._layers[0].self_attn
        self._head_dim = int(attention.head_dim)
        self._heads = int(config.num_attention_heads)
        self._kv_heads = int(config.num_key_value_heads)
        self._scaling = float(attention.scaling)
        if not isinstance(compile, bool):
            raise TypeError(f"GraphDecoder: compile expected True or False, got {compile!r}")
        self.stats.compiled = compile
        self._compiled_step: Any = None
        if compile:
            # dynamic=False: one graph per captured shape (rows bucket x buffer length), as the CUDA graphs are; the
            # recompile limit must hold every shape the decoder keeps.
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 4 * max_graphs)
            self._compiled_step = torch.compile(self._step_buffers, backend=compile_backend, fullgraph=True,
                                                dynamic=False)

    # ------------------------------------------------------------------------------------------------------------

    def slot_of(self, key: Hashable) -> int:
        """The adapter slot of a prompt's route key: its adapter's, or the base model's for ``None``."""
        if key is None:
            return self.base_slot
        if key not in self._slot:
            raise ValueError(f"GraphDecoder: no adapter {key!r} among {list(self.adapters)}")
        return self._slot[key]

    def start(self, prefill_cache: Any, rows: Tensor, prompt_mask: Tensor, positions: Tensor, max_new_tokens: int,
              row_slots: Sequence[int]) -> DecodeSession:
        """A decode of ``len(rows)`` rows after an eager prefill: ``prefill_cache`` holds one row per prompt
        (``[prompts, kv_heads, width, head_dim]`` per layer), ``rows`` the prompt of each decoded row, ``prompt_mask``
        and ``positions`` the rows' ``[rows, width]`` mask and position ids, ``row_slots`` each row's adapter slot.
        Call under ``torch.inference_mode``."""
        n = len(rows)
        width = int(prompt_mask.shape[1])
        bucket = row_bucket(n)
        length = -(-(width + max_new_tokens) // LENGTH_STEP) * LENGTH_STEP
        self._refresh_stacks()
        graph = self._graph(bucket, length, prefill_cache)
        padded = torch.cat([rows, rows[:1].expand(bucket - n)]) if bucket > n else rows
        for layer, (keys, values) in enumerate(zip(graph.keys, graph.values, strict=True)):
            source = prefill_cache.layers[layer]
            keys[:, :, :width].copy_(source.keys[:, :, :width].index_select(0, padded))
            values[:, :, :width].copy_(source.values[:, :, :width].index_select(0, padded))
        fill = torch.arange(bucket, device=rows.device).clamp(max=n - 1) if bucket > n else slice(None)
        graph.mask.zero_()
        graph.mask[:, 0, 0, :width].copy_(prompt_mask[fill].bool())
        graph.positions.copy_(positions[fill, -1:] + 1)
        graph.write_at.fill_(width)
        slots = torch.tensor(list(row_slots), dtype=torch.long, device=self.device)
        graph.row_slots.copy_(slots[fill] if bucket > n else slots)
        self.stats.shapes[f"{bucket}x{length}"] = self.stats.shapes.get(f"{bucket}x{length}", 0) + 1
        return DecodeSession(self, graph, n)

    # ------------------------------------------------------------------------------------------------------------

    def _graph(self, rows: int, length: int, like: Any) -> _Graph:
        key = (rows, length)
        if key in self._graphs:
            self._graphs.move_to_end(key)
            return self._graphs[key]
        while len(self._graphs) >= self.max_graphs:
            self._graphs.popitem(last=False)
        sample = like.layers[0].keys
        shape = (rows, self._kv_heads, length, self._head_dim)
        graph = _Graph(
            rows=rows, length=length,
            tokens=torch.zeros(rows, dtype=torch.long, device=self.device),
            positions=torch.zeros(rows, 1, dtype=torch.long, device=self.device),
            write_at=torch.zeros(1, dtype=torch.long, device=self.device),
            mask=torch.zeros(rows, 1, 1, length, dtype=torch.bool, device=self.device),
            row_slots=torch.full((rows,), self.base_slot, dtype=torch.long, device=self.device),
            keys=[sample.new_zeros(shape) for _ in self._layers],
            values=[sample.new_zeros(shape) for _ in self._layers],
        )
        graph.mask[:, :, :, 0] = True  # the warm-up steps read position 0 (zeros) rather than an empty row
        if self.capture:
            try:
                self._capture(graph)
            except RuntimeError as error:  # e.g. a kernel that synchronizes: decode uncaptured rather than fail
                warnings.warn(f"GraphDecoder: CUDA graph capture failed, decoding uncaptured: {error}", stacklevel=3)
                self.capture, self.stats.capture_error = False, f"{type(error).__name__}: {error}"[:2000]
                graph.graph, graph.logits = None, None
                self._graphs.clear()
        self._graphs[key] = graph
        return graph

    def _capture(self, graph: _Graph) -> None:
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up: lazy kernels and workspaces are set up outside the capture
                graph.write_at.zero_()
                self._step(graph)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph.write_at.zero_()
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured, pool=self._pool):
            logits = self._step(graph)
        graph.graph, graph.logits = captured, logits
        self.stats.captures += 1

    def _step(self, graph: _Graph) -> Tensor:
        """One token per row through the model, reading and writing only ``graph``'s buffers; returns the rows'
        next-token logits (float32). Compiled where the decoder was asked to, and that worked."""
        buffers = (graph.tokens, graph.positions, graph.write_at, graph.mask, graph.row_slots, graph.keys,
                   graph.values)
        if self._compiled_step is None:
            return self._step_buffers(*buffers)
        try:
            if graph.compiled:
                return self._compiled_step(*buffers)
            started = time.perf_counter()  # the shape's first compiled step: it compiles
            logits = self._compiled_step(*buffers)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.stats.compile_s += time.perf_counter() - started
            graph.compiled = True
            return logits
        except Exception as error:  # a graph break or a backend failure: decode uncompiled rather than fail
            warnings.warn(f"GraphDecoder: torch.compile of the step failed, decoding uncompiled: {error}",
                          stacklevel=3)
            self._compiled_step, self.stats.compiled = None, False
            self.stats.compile_error = f"{type(error).__name__}: {error}"[:2000]
            return self._step_buffers(*buffers)

    def _step_buffers(self, tokens: Tensor, positions: Tensor, write_at: Tensor, mask: Tensor, row_slots: Tensor,
                      keys: list[Tensor], values: list[Tensor]) -> Tensor:
        """:meth:`_step` on the buffers themselves (what ``torch.compile`` traces: tensors in, tensors out). Mirrors
        transformers' Llama decoder layer for one query position."""
        base, rows = self._base, tokens.shape[0]
        mask.index_fill_(3, write_at, True)
        hidden = base.model.embed_tokens(tokens[:, None])  # [rows, 1, hidden]
        cos, sin = base.model.rotary_emb(hidden, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [rows, 1, 1, head_dim]: broadcast over heads
        heads, kv_heads, head_dim = self._heads, self._kv_heads, self._head_dim
        for index, layer in enumerate(self._layers):
            attention = layer.self_attn
            x = layer.input_layernorm(hidden)
            query = self._linear(attention.q_proj, x, row_slots).view(rows, 1, heads, head_dim).transpose(1, 2)
            key = self._linear(attention.k_proj, x, row_slots).view(rows, 1, kv_heads, head_dim).transpose(1, 2)
            value = self._linear(attention.v_proj, x, row_slots).view(rows, 1, kv_heads, head_dim).transpose(1, 2)
            query, key = _rotate(query, cos, sin), _rotate(key, cos, sin)
            keys[index].index_copy_(2, write_at, key)
            values[index].index_copy_(2, write_at, value)
            # Query heads h·g .. h·g+g-1 share key/value head h (transformers' repeat_kv): with one query position
            # they are g query rows of one attention over that head's keys.
            grouped = query.reshape(rows, kv_heads, heads // kv_heads, head_dim)
            attended = torch.nn.functional.scaled_dot_product_attention(
                grouped, keys[index], values[index], attn_mask=mask, scale=self._scaling)
            attended = attended.reshape(rows, 1, heads * head_dim)
            hidden = hidden + self._linear(attention.o_proj, attended, row_slots)
            x = layer.post_attention_layernorm(hidden)
            mlp = layer.mlp
            gated = mlp.act_fn(self._linear(mlp.gate_proj, x, row_slots)) * self._linear(mlp.up_proj, x, row_slots)
            hidden = hidden + self._linear(mlp.down_proj, gated, row_slots)
        hidden = base.model.norm(hidden)
        logits = self._linear(base.lm_head, hidden, row_slots)[:, -1].float()
        write_at.add_(1)
        positions.add_(1)
        return logits

    def _linear(self, module: Any, x: Tensor, row_slots: Tensor) -> Tensor:
        """``module(x)`` for a plain linear layer, or its base layer plus the row's LoRA update ``x·A·(B·s)``."""
        stacks = self._stacks.get(id(module))
        if stacks is None:
            return torch.nn.functional.linear(x, module.weight, module.bias)
        base = module.base_layer
        out = torch.nn.functional.linear(x, base.weight, base.bias)
        _, a_stack, b_stack = stacks
        a_rows, b_rows = a_stack.index_select(0, row_slots), b_stack.index_select(0, row_slots)
        delta = torch.bmm(torch.bmm(x.to(a_rows.dtype), a_rows), b_rows)
        return out + delta.to(out.dtype)

    def _refresh_stacks(self) -> None:
        """Copy every adapter's current ``A`` and ``B·scaling`` into the stacks the graphs read (see
        :func:`~llm_marl_baselines.lora_layers.stacked_adapters`), so the decode sees what training changed."""
        slots = len(self.adapters)
        with torch.no_grad():
            for module, a_stack, b_stack in self._stacks.values():
                a, b = stacked_adapters(module, self.adapters)
                a_stack[:slots].copy_(a)
                b_stack[:slots].copy_(b)

    def _account(self, graph: _Graph, rows: int) -> None:
        self.stats.steps += 1
        self.stats.row_steps += rows
        kv = sum(k.numel() * k.element_size() for k in graph.keys) * 2
        self.stats.bytes_read += self._weight_bytes + kv


class DecodeSession:
    """One decode: :meth:`step` feeds each row's last token and returns the rows' next-token logits."""

    def __init__(self, decoder: GraphDecoder, graph: _Graph, rows: int) -> None:
        self.decoder, self.graph, self.rows = decoder, graph, rows

    def step(self, tokens: Tensor) -> Tensor:
        """``tokens``: ``[rows]`` ids; returns ``[rows, vocab]`` float32 logits (a view valid until the next step)."""
        graph, n = self.graph, self.rows
        graph.tokens[:n].copy_(tokens)
        if graph.rows > n:
            graph.tokens[n:].copy_(tokens[:1].expand(graph.rows - n))
        if graph.graph is not None:
            graph.graph.replay()
            logits = graph.logits
        else:
            logits = self.decoder._step(graph)
        self.decoder._account(graph, n)
        assert logits is not None
        return logits[:n]


def graph_decoder(model: Any, adapters: Sequence[str] = (), *, capture: bool | None = None,
                  compile: bool = False) -> GraphDecoder:
    """The :class:`GraphDecoder` of ``model`` and ``adapters`` (compiled or not), built on first use and kept on the
    model itself, so its captured graphs and buffers are reused across calls and freed with the model (a table keyed
    by the model would keep it alive: the decoder refers to it)."""
    decoders: dict[tuple[Any, ...], GraphDecoder] = model.__dict__.setdefault("_llm_marl_graph_decoders", {})
    key = (*adapters, capture, compile)
    if key not in decoders:
        decoders[key] = GraphDecoder(model, adapters, capture=capture, compile=compile)
    return decoders[key]


def decoder_for_active_adapter(model: Any, *, cuda_only: bool = True) -> tuple[GraphDecoder, str | None] | None:
    """``(decoder, route key)`` to sample ``model`` as it stands through a graph decoder on CUDA: a plain model with
    key None; a peft model with its one active adapter's name, or None (the base slot) while its adapters are
    disabled. None where the graph decoder does not apply: a model off CUDA (``cuda_only=False`` takes any device,
    for tests), an unsupported architecture, or several adapters active at once (peft sums them; the decoder routes
    one per row)."""
    base = _base_model(model)
    if (cuda_only and base.lm_head.weight.device.type != "cuda") or not supports(model):
        return None
    lora = next((module for module in base.modules() if is_lora_layer(module)), None)
    if lora is None:
        return graph_decoder(model), None
    names = tuple(sorted({name for module in base.modules() if is_lora_layer(module) for name in module.lora_A}))
    if lora.disable_adapters:
        return graph_decoder(model, names), None
    active = list(lora.active_adapters)
    if len(active) != 1:
        return None
    return graph_decoder(model, names), active[0]


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary position embedding, the half-split form transformers' Llama uses (Su et al. 2021, RoFormer, eq. 34):
    ``x·cos + rotate_half(x)·sin`` with ``rotate_half([x1, x2]) = [-x2, x1]``."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _base_model(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _plain_lora(module: Any) -> bool:
    """A plain ``nn.Linear``, or a peft LoRA layer with plain adapters over a plain ``nn.Linear`` (the step reads its
    weight directly)."""
    if type(module) is torch.nn.Linear:
        return True
    return (is_lora_layer(module) and type(module.base_layer) is torch.nn.Linear and has_plain_adapters(module)
            and all(type(a) is torch.nn.Linear for a in module.lora_A.values()))


def _projections(layer: Any) -> list[Any]:
    attention, mlp = layer.self_attn, layer.mlp
    names = ("gate_proj", "up_proj", "down_proj", "act_fn")
    if not all(hasattr(mlp, name) for name in names):
        return [None]
    return [attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj, mlp.gate_proj, mlp.up_proj,
            mlp.down_proj]
