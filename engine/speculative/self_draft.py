"""Self-draft: a cheaper form of the target model drafts for it (`--draft self`, torch runner).

- A bf16 or int8 target drafts with the same weights requantized to int4 (group-32 packed
  matmuls): a second TorchRunner loaded from the same file with weight_format="int4". Its
  predictions are nearly the target's, so acceptance is high, and each draft token costs the
  int4 kernels' time instead of the dense ones'.
- An int4 target (nothing cheaper to quantize to) drafts with its own first layers (an early
  exit through the shared final norm and LM head): the draft shares every weight with the
  target and only owns a KV store for those layers.
Both share the target's tokenizer, so no tokenizer check can fail.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.api import EngineOptions
    from ember.engine.runners.base import Runner

EARLY_EXIT_FRACTION = 0.5  # an int4 target drafts with this share of its layers


def weight_format(runner: Any) -> str:
    """The storage format of a torch runner's layer weights: dense, int8 or int4."""
    return str(runner.model.layers[0].w.qkv.fmt)


def self_draft_runner(target: Runner, options: EngineOptions) -> tuple[Runner, str]:
    """A draft runner built from the target itself, and a label naming what it is."""
    if target.info.name != "torch":
        raise EngineError(
            f"--draft self needs the torch runner (this model runs on {target.info.name}): "
            "add --runner torch, or use --draft lookup"
        )
    name = getattr(getattr(target, "src", None), "path", None)
    label = getattr(name, "name", "target")
    fmt = weight_format(target)
    if fmt in ("dense", "int8"):
        return int4_runner(target, options), f"{label} as int4 (self-draft of a {fmt} target)"
    num_layers = max(1, round(target.model.cfg.n_layers * EARLY_EXIT_FRACTION))  # type: ignore[attr-defined]
    return early_exit_runner(target, num_layers), f"{label}, first {num_layers} layers (self-draft)"


def int4_runner(target: Any, options: EngineOptions) -> Runner:
    """The target's model file loaded again with int4 weights (LM head included)."""
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    opts = TorchOptions(
        device=target.device.type,
        dtype=str(target.dtype).removeprefix("torch."),
        weight_format="int4",
        head_format="int4",
        threads=options.threads,
        packed_cache_dir=options.packed_cache_dir,
    )
    runner: Runner = TorchRunner.load(target.src.path, opts, digest=target.info.model_digest)
    return runner


def early_exit_runner(target: Any, num_layers: int) -> Runner:
    """A runner over the target's first num_layers layers (shared modules, its own KV store)."""
    from ember.engine.runners.torch.model import Transformer
    from ember.engine.runners.torch.runner import TorchRunner

    cfg = target.model.cfg
    if not 1 <= num_layers < cfg.n_layers:
        raise EngineError(f"early-exit draft: {num_layers} layers of {cfg.n_layers} is no draft")
    draft_cfg = dataclasses.replace(
        cfg, n_layers=num_layers, layer_sliding=tuple(cfg.layer_sliding[:num_layers])
    )
    # a copy of the source: closing the draft must not clear the target's tensor table
    src = dataclasses.replace(target.src, config=draft_cfg, tensors=dict(target.src.tensors))
    model = target.model
    draft = Transformer(
        draft_cfg, model.embed, list(model.layers[:num_layers]), model.norm, model.head
    )
    runner: Runner = TorchRunner(src, draft, target.device, target.dtype)
    return runner
