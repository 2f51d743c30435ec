"""Load a causal language model and its tokenizer, or build a small one offline.

Researchers bring their own checkpoints, so :func:`load_model` takes either a local directory
(``save_pretrained`` output) or a hub id such as ``Qwen/Qwen3.5-0.8B``. A hub id is first looked up in
the local cache only; the network is tried afterwards unless ``HF_HUB_OFFLINE`` is set. When neither
works, :class:`ModelLoadError` says what to do instead of surfacing a stack of HTTP retries.

Weights go to the GPU in bfloat16 when one is present and stay on the CPU in float32 otherwise: bf16
matrix work is slow and lossy on most CPUs, and float32 keeps tests deterministic. Models on SDPA attention
come back on :data:`gencoord_env.agents.lm.attention.PAD_SAFE_SDPA` (left-padded batches without NaN on GPUs).

Where no pretrained weights exist at all, :func:`build_tiny` trains a byte-level BPE tokenizer on a
corpus with ``tokenizers`` and builds a small Qwen3 / Qwen3.5 model from a config written in code, and
:func:`build_qwen35_08b_config` gives the Qwen3.5-0.8B text architecture for random-weight timing.

Example::

    lm = load_model("runs/sft/final")          # or load_model("Qwen/Qwen3.5-0.8B")
    lm.model, lm.tokenizer, lm.device, lm.dtype
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from gencoord_env.agents.lm.attention import use_pad_safe_attention
from gencoord_env.errors import Fault, UsageError

if TYPE_CHECKING:
    from transformers import Qwen3_5TextConfig

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "LoadedModel",
    "ModelLoadError",
    "build_qwen35_08b_config",
    "binding_codes",
    "world_names",
    "build_tiny",
    "default_device",
    "default_dtype",
    "load_model",
    "train_tokenizer",
]

# Same turn markers as the Qwen chat format, so prompts built for a trained-from-scratch model and for a
# pretrained Qwen checkpoint have the same shape.
SPECIAL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# owner/name, as the hub spells repository ids.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ModelLoadError(Fault):
    """A model or tokenizer could not be loaded; the message says what to do about it."""


@dataclass(frozen=True)
class LoadedModel:
    """A model in eval mode on its device, with the tokenizer that produced its training data."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    source: str


def default_device() -> torch.device:
    """The first CUDA device when there is one, else the CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on GPUs, float32 on CPUs (see the module docstring for why)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return default_device()
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(
            f"device {str(device)!r} was requested but torch sees no CUDA device "
            f"(torch {torch.__version__}); pass device='cpu' or run on a machine with a GPU"
        )
    return resolved


def _from_pretrained(source: str, dtype: torch.dtype, local_only: bool) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, local_files_only=local_only)
    return model, tokenizer


def load_model(
    source: str | os.PathLike[str],
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> LoadedModel:
    """Load a causal LM and its tokenizer from a directory or a hub id, ready for inference.

    Raises:
        ModelLoadError: the directory does not exist or holds no model, or the hub id is neither in
            the local cache nor downloadable (hub unreachable or ``HF_HUB_OFFLINE`` set).
    """
    text = os.fspath(source)
    resolved_device = _resolve_device(device)
    resolved_dtype = dtype if dtype is not None else default_dtype(resolved_device)
    path = Path(text).expanduser()

    if path.exists():
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{text!r} exists but is not a model directory (expected a folder with config.json, "
                "weights and tokenizer files, as written by save_pretrained)"
            )
        try:
            model, tokenizer = _from_pretrained(str(path), resolved_dtype, local_only=True)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(
                f"could not load the model in {text!r}: {exc}. The folder needs config.json, the "
                "weights (*.safetensors) and the tokenizer files; re-save it with "
                "model.save_pretrained(dir) and tokenizer.save_pretrained(dir)"
            ) from None
    elif _HUB_ID.match(text) and not text.startswith((".", "~")):
        model, tokenizer = _load_hub_id(text, resolved_dtype)
    else:
        raise ModelLoadError(
            f"no model directory at {text!r} (resolved to {str(path.resolve())!r}); pass an existing "
            "folder written by save_pretrained, or a hub id such as 'Qwen/Qwen3.5-0.8B' whose weights are "
            "in the local Hugging Face cache"
        )

    if tokenizer.pad_token_id is None:
        # Batched generation pads on the left; EOS is a safe pad because padded positions are masked.
        tokenizer.pad_token = tokenizer.eos_token
    model.to(resolved_device).eval()
    use_pad_safe_attention(model)
    return LoadedModel(model=model, tokenizer=tokenizer, device=resolved_device, dtype=resolved_dtype, source=text)


def _load_hub_id(hub_id: str, dtype: torch.dtype) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    try:
        return _from_pretrained(hub_id, dtype, local_only=True)
    except (OSError, ValueError) as cached_exc:
        cached_error = cached_exc
    if _hub_offline():
        raise ModelLoadError(
            f"the weights of {hub_id!r} are not in the local Hugging Face cache and HF_HUB_OFFLINE is set, "
            f"so the hub was not asked ({cached_error.__class__.__name__}). Download them where the hub is "
            f"reachable (`hf download {hub_id} --local-dir DIR`), copy DIR here and pass its path, or point "
            "HF_HOME at a cache that holds them"
        ) from None
    try:
        return _from_pretrained(hub_id, dtype, local_only=False)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"could not fetch {hub_id!r}: it is not in the local Hugging Face cache and the hub did not "
            f"serve it ({exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). Download it "
            f"where the hub is reachable (`hf download {hub_id} --local-dir DIR`) and pass DIR, or set "
            "HF_HOME to a cache that holds it"
        ) from None


# --------------------------------------------------------------------------- offline construction


def binding_codes() -> tuple[str, ...]:
    """The public codebook's binding codes (``SITE_A``, ``DEPOSIT``, ...), longest first."""
    from gencoord_env.tasks.prior import prior

    return tuple(sorted(prior().codebook, key=lambda c: (-len(c), c)))


def world_names() -> tuple[str, ...]:
    """Every name of the world a record's argument can carry, longest first: the stations of the prior's
    layout (``site_a``, ``order_chest``), the agent ids (``agent_b``) and the items of the recipe table
    (``oak_planks``, ``cobblestone_slab``)."""
    from gencoord_env.tasks.episode import TEAM_AGENTS
    from gencoord_env.tasks.prior import prior
    from gencoord_env.world.recipes import load_recipes

    book = load_recipes()
    items = {*book.crafting, *(i for r in book.crafting.values() for i in r.inputs), *book.smelting,
             *book.smelting.values(), *book.fuel_ticks, *book.blocks, *book.stack}
    names = {s.name for s in prior().stations} | set(TEAM_AGENTS) | items
    return tuple(sorted(names, key=lambda c: (-len(c), c)))


def train_tokenizer(corpus: Iterable[str], vocab_size: int = 1024, model_max_length: int = 2048,
                    whole_words: Iterable[str] | None = None) -> PreTrainedTokenizerBase:
    """Train a byte-level BPE tokenizer on ``corpus`` with no network access.

    Byte-level so that any string (including characters never seen in training) round-trips.
    ``whole_words`` are added as one token each, wherever they stand as a word (``()``: none). The default is
    every binding code (:func:`binding_codes`: renaming puts any code in any row) and every name of the
    world (:func:`world_names`) that ``corpus`` contains: a name the corpus lacks stays in sub-word pieces,
    which other words train, rather than becoming a token no training row shows. A Direct Short DSL record names its
    binding twice: as the code (``bind=SITE_B``) and in the arguments that depend on it (``site=site_b``,
    ``item=oak_log`` against ``item=oak_planks``). Split by BPE, each of these decisions is a letter or a
    suffix after a stem both branches share (``site`` ``_`` ``b``, ``oak`` ``_`` ``log``), which a model can
    only place by matching the tokens before it, in a stretch that both branches' nodes repeat; whole, it
    is one token to copy from the node the code names, as the code itself is.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    texts = list(corpus)
    tok.train_from_iterator(texts, trainer)
    if whole_words is None:
        named = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, world_names())) + r")(?![A-Za-z0-9_])")
        present = {m.group(1) for text in texts for m in named.finditer(text)}
        words = binding_codes() + tuple(w for w in world_names() if w in present)
    else:
        words = tuple(whole_words)
    tok.add_tokens([AddedToken(w, single_word=True, normalized=False) for w in words])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|pad|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        model_max_length=model_max_length,
        padding_side="left",
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_tiny(
    corpus: Iterable[str] | None = None,
    *,
    tokenizer: PreTrainedTokenizerBase | None = None,
    arch: Literal["qwen3", "qwen3_5"] = "qwen3",
    vocab_size: int = 1024,
    hidden_size: int = 128,
    num_layers: int = 2,
    seed: int = 0,
    device: str | torch.device | None = "cpu",
    dtype: torch.dtype | None = None,
) -> LoadedModel:
    """A randomly initialised small Qwen3 / Qwen3.5 model plus an offline-trained tokenizer.

    For tests and for training from scratch where no pretrained weights are available. The Qwen3.5
    variant alternates Gated-DeltaNet (linear attention) and full attention layers like the real one.
    Give either ``corpus`` (a tokenizer of ``vocab_size`` is trained on it) or a ready ``tokenizer``
    (one shared by several runs, e.g. pretraining and fine-tuning); the model's vocabulary is its length.
    """
    from transformers import Qwen3Config, Qwen3_5TextConfig

    if hidden_size % 4:
        raise UsageError(f"hidden_size must be a multiple of 4 (4 attention heads), got {hidden_size}")
    if (corpus is None) == (tokenizer is None):
        raise UsageError("give exactly one of corpus (train a tokenizer on it) and tokenizer (use this one)")
    if tokenizer is None:
        assert corpus is not None
        tokenizer = train_tokenizer(corpus, vocab_size=vocab_size)
    elif tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise UsageError("the tokenizer needs EOS and pad tokens (train_tokenizer sets both)")
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if arch == "qwen3":
        config = Qwen3Config(**common)
    elif arch == "qwen3_5":
        config = Qwen3_5TextConfig(
            **common,
            layer_types=(["linear_attention", "full_attention"] * num_layers)[:num_layers],
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=32,
            linear_value_head_dim=32,
        )
    else:
        raise UsageError(f"arch must be 'qwen3' or 'qwen3_5', got {arch!r}")
    resolved_device = _resolve_device(device)
    resolved_dtype = dtype if dtype is not None else default_dtype(resolved_device)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).to(device=resolved_device, dtype=resolved_dtype).eval()
    use_pad_safe_attention(model)
    return LoadedModel(model=model, tokenizer=tokenizer, device=resolved_device, dtype=resolved_dtype, source=f"tiny-{arch}")


def build_qwen35_08b_config(eos_token_id: int = 248046, pad_token_id: int = 248044) -> Qwen3_5TextConfig:
    """The text architecture of Qwen3.5-0.8B (public config), for random-weight timing and training.

    24 layers in groups of three Gated-DeltaNet layers then one gated full-attention layer, hidden
    size 1024, a 248,320-token vocabulary with tied embeddings. Token ids default to the published
    ``<|im_end|>`` / ``<|endoftext|>`` ids.
    """
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(
        vocab_size=248320,
        hidden_size=1024,
        intermediate_size=3584,
        num_hidden_layers=24,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=256,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        full_attention_interval=4,
        max_position_embeddings=262144,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
        },
        bos_token_id=None,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )
