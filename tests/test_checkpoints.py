"""grpo_core.checkpoints on the tiny policy: a saved checkpoint restores the same weights,
optimizer state and step into a fresh model, and an interrupted save leaves no checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from grpo_core.checkpoints import (
    CHECKPOINT_DIR,
    STATE_FILE,
    checkpoint_step,
    restore_checkpoint,
    save_checkpoint,
)


def trained(make_policy):
    """A tiny policy after one AdamW step, and its optimizer."""
    model, tokenizer = make_policy(seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.tensor([[3, 4, 5]])).logits.sum().backward()
    optimizer.step()
    return model, tokenizer, optimizer


def test_a_checkpoint_restores_weights_optimizer_and_step(new_tiny_policy, tmp_path):
    model, tokenizer, optimizer = trained(new_tiny_policy)
    assert checkpoint_step(tmp_path) is None
    folder = save_checkpoint(tmp_path, 7, model, tokenizer, optimizer, {"learning_rate": 1e-2})
    assert folder == tmp_path / CHECKPOINT_DIR and checkpoint_step(tmp_path) == 7
    state = json.loads((folder / STATE_FILE).read_text())
    assert state == {"step": 7, "config": {"learning_rate": 1e-2}}
    fresh, _ = new_tiny_policy(seed=1)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    assert not all(torch.equal(a, b) for a, b in zip(fresh.parameters(), model.parameters(),
                                                      strict=True))
    assert restore_checkpoint(tmp_path, fresh, fresh_optimizer) == 7
    for a, b in zip(fresh.parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b)
    saved, restored = optimizer.state_dict(), fresh_optimizer.state_dict()
    assert saved["state"].keys() == restored["state"].keys()
    for key, moments in saved["state"].items():
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(moments[name], restored["state"][key][name])


def test_an_interrupted_save_leaves_the_previous_checkpoint(new_tiny_policy, tmp_path,
                                                             monkeypatch):
    model, tokenizer, optimizer = trained(new_tiny_policy)
    save_checkpoint(tmp_path, 1, model, tokenizer, optimizer, {})

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", fail)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 2, model, tokenizer, optimizer, {})
    assert checkpoint_step(tmp_path) == 1  # the complete one is still there, untouched
