"""A run's checkpoint: ``<out_dir>/checkpoint/`` holds the weights (a LoRA model: its adapters
only), the tokenizer, the optimizer's state and the step, written atomically, so that
``train(..., resume=True)`` (``--resume``) goes on from the step it saved.

The loop decides when to save (at the end, on Ctrl-C, on an error, every ``save_every``
steps); this module only writes and reads the folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from grpo_core.lora import has_adapter, load_adapter_weights
from grpo_core.run_files import jsonable

CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "trainer_state.json"


def save_checkpoint(out_dir: Path | str, step: int, model: Any, tokenizer: Any,
                    optimizer: torch.optim.Optimizer, config: dict[str, Any]) -> Path:
    """Write ``model``, ``tokenizer``, ``optimizer``'s state, ``step`` and ``config`` (the
    loop's settings) to ``<out_dir>/checkpoint``: into a staging folder first, renamed into
    place, so an interrupted save never leaves a folder that looks complete."""
    final = Path(out_dir) / CHECKPOINT_DIR
    staging = final.with_name(CHECKPOINT_DIR + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)  # a LoRA model saves its adapters only
    tokenizer.save_pretrained(staging)
    torch.save(optimizer.state_dict(), staging / "optimizer.pt")
    state = {"step": step, "config": jsonable(config)}
    (staging / STATE_FILE).write_text(json.dumps(state, indent=1))
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final


def checkpoint_step(out_dir: Path | str) -> int | None:
    """The step saved in ``<out_dir>/checkpoint``, or None when there is none."""
    state = Path(out_dir) / CHECKPOINT_DIR / STATE_FILE
    return json.loads(state.read_text())["step"] if state.exists() else None


def restore_checkpoint(out_dir: Path | str, model: Any, optimizer: torch.optim.Optimizer) -> int:
    """Load the checkpoint's weights (in ``model``'s own dtype) and optimizer state into
    ``model`` and ``optimizer``; return its step."""
    folder = Path(out_dir) / CHECKPOINT_DIR
    if has_adapter(model):
        load_adapter_weights(model, folder)
    else:
        dtype = next(model.parameters()).dtype
        saved = type(model).from_pretrained(folder, dtype=dtype)
        model.load_state_dict(saved.state_dict())
        del saved
    optimizer_file = folder / "optimizer.pt"
    if optimizer_file.exists():
        optimizer.load_state_dict(torch.load(optimizer_file, weights_only=True))
    return json.loads((folder / STATE_FILE).read_text())["step"]
