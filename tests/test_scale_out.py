"""Scaling out: ``scripts/trl_mbpp.py`` as a 2-process data-parallel job on CPU (gloo).

Launched exactly as the README says (``accelerate launch --config_file
scripts/accelerate/cpu_2proc.yaml``), on the offline smoke model, for 2 steps with 8-token
completions. Each process writes ``report-rank<r>.json`` with a SHA-256 of its parameters before
and after training and what its reward functions saw. The test checks that

- both processes ran and finished the 2 steps;
- they scored *different* completions (each generated its own share of the batch), so their
  local gradients differed and only the all-reduce can have kept the weights equal;
- training moved the weights, and both processes end with bit-identical parameters.

The unit-test reward alone is 0 for every 8-token completion of a 135M model, which would
give zero advantages and leave the weights untouched; the run adds ``length_reward`` so the
gradients are not zero.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("accelerate")

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "scripts" / "trl_mbpp.py"
CONFIG = REPO_ROOT / "scripts" / "accelerate" / "cpu_2proc.yaml"
STEPS = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    """Run the job once; return the two ranks' reports and the launcher's output."""
    from grpo_core.models import ensure_offline_model

    ensure_offline_model()  # convert the model once here, not in two processes at once
    out = tmp_path_factory.mktemp("scale_out")
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(CONFIG), "--main_process_port", str(free_port()),
        str(SCRIPT), "--profile", "smoke", "--max-steps", str(STEPS),
        "--max-completion-length", "8", "--rewards", "unit_test,length", "--out", str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    reports = [json.loads((out / f"report-rank{r}.json").read_text()) for r in range(2)]
    return reports, log


@pytest.mark.model
@pytest.mark.slow
def test_both_processes_finish_the_steps(two_process_run):
    reports, log = two_process_run
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["world_size"] == 2 and r["steps"] == STEPS for r in reports)
    assert "2 process(es) x 2 completions" in log  # the batch really was split


@pytest.mark.model
@pytest.mark.slow
def test_each_process_scores_its_own_completions(two_process_run):
    reports, _ = two_process_run
    seen = [[entry["completions_sha256"] for entry in r["rewards_seen"]] for r in reports]
    assert len(seen[0]) == len(seen[1]) == 2 * STEPS  # two reward functions per step
    assert all(entry["completions"] == 2 for r in reports for entry in r["rewards_seen"])
    assert seen[0] != seen[1], "both processes generated the same completions at every step"


@pytest.mark.model
@pytest.mark.slow
def test_parameters_moved_and_are_identical_on_both_processes(two_process_run):
    reports, _ = two_process_run
    assert reports[0]["initial_parameters_sha256"] == reports[1]["initial_parameters_sha256"]
    assert reports[0]["final_parameters_sha256"] != reports[0]["initial_parameters_sha256"], (
        "the weights did not move: zero advantages at every step?")
    assert reports[0]["final_parameters_sha256"] == reports[1]["final_parameters_sha256"]


def test_script_says_clearly_when_an_optional_backend_is_missing():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ACCELERATE_USE_DEEPSPEED": "true"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke", "--dry-run"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        assert done.returncode == 1 and "pip install deepspeed" in done.stderr, done.stderr
    else:
        assert done.returncode == 0, done.stderr
    env.pop("ACCELERATE_USE_DEEPSPEED")
    done = subprocess.run([sys.executable, str(SCRIPT), "--profile", "smoke", "--use-vllm",
                           "--dry-run"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1 and "needs a CUDA GPU" in done.stderr, done.stderr
