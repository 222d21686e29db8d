"""Which code, and which draws, made a recorded run (``config.json``'s ``code`` and ``draws``).

Two runs of one setup are the same measurement only if they draw the same random numbers the
same way. The seed fixes the numbers; the code and the machine decide what is done with them:
the sampler (the decoding step, the sampling copy's dtype and packing), the precision plan, the
torch and transformers builds and the CPU's kernels. Change any of them and the base model's
step-0 evaluation, with the same model, problems and evaluation seed, samples other
completions (issue 45 found 264 of 345 different between two recording batches).

So every run the command line records writes into ``config.json``:

- ``code``: :func:`code_version`, the commit of the package that ran and whether its tree was
  clean (tracked changes anywhere but ``data/runs/``, untracked files in the package);
- ``draws``: :func:`draws_fingerprint`, what decides the draws beside the seed, with a short
  ``id`` (a hash of the rest) that two runs share exactly when all of it agrees.

:func:`provenance_differences` names what differs between two runs' records; ``seeds``
uses it to say why two step-0 evaluations differ, and ``tools/reproduce.py`` to say whether
today's code can replay a run. Standard library only (floor 1): git is called as a program.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CODE_KEY = "code"
DRAWS_KEY = "draws"
# written by the runs themselves while they are recorded: not a change to the code
RECORDED_RUNS = "data/runs"
# changed paths kept in the record (the count is always kept)
MAX_LISTED = 20


def _git(folder: Path, *args: str) -> str | None:
    """``git -C folder args``'s output, or None where git or the repository is missing."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def code_version(folder: str | Path | None = None) -> dict[str, Any]:
    """The commit of the code in ``folder`` (default: this package's own folder, so that a run
    names the code that ran, also from another worktree) and whether its tree was clean.

    Returns:
        ``{"commit": 40 hex digits, "clean": bool, "changed": [paths], "changed_count": n}``,
        or ``{"commit": None, "clean": None, "note": why}`` outside a git checkout (an
        installed package, a downloaded zip): such a run cannot be replayed by commit.
    """
    folder = Path(folder) if folder is not None else Path(__file__).resolve().parent
    found = _git(folder, "rev-parse", "--show-toplevel", "HEAD")
    if found is None:  # no git, no checkout, or no commit yet
        return {"commit": None, "clean": None,
                "note": f"{folder} is not in a git checkout: the commit is unknown"}
    top, commit = found.splitlines()
    status = _git(Path(top), "status", "--porcelain", "--", ".",
                  f":(exclude){RECORDED_RUNS}") or ""
    changed = sorted({line[3:].strip() for line in status.splitlines() if line.strip()
                      if not line.startswith("??") or line[3:].startswith("grpo_core/")})
    return {"commit": commit, "clean": not changed, "changed": changed[:MAX_LISTED],
            "changed_count": len(changed)}


def draws_fingerprint(parts: Mapping[str, Any]) -> dict[str, Any]:
    """``parts`` (what decides the draws beside the seed: ``sampler``, ``precision``,
    ``torch``, ...) with ``id``: the first 12 hex digits of the SHA-256 of their sorted JSON,
    equal for two runs exactly when every part is."""
    if DRAWS_KEY in parts or "id" in parts:
        raise ValueError("the parts of a fingerprint cannot contain 'id' or 'draws'")
    text = json.dumps(dict(parts), sort_keys=True, default=str)
    return {**parts, "id": hashlib.sha256(text.encode()).hexdigest()[:12]}


def short_commit(code: Mapping[str, Any] | None) -> str:
    """``abc1234`` (``+changes`` when the tree was not clean), or ``unrecorded``."""
    if not code or not code.get("commit"):
        return "unrecorded"
    return code["commit"][:7] + ("" if code.get("clean") else "+changes")


def describe_provenance(config: Mapping[str, Any]) -> str:
    """One line: the commit (``run_summary`` and the notebooks print it) and the draws' id."""
    draws = config.get(DRAWS_KEY)
    code = config.get(CODE_KEY)
    if not code and not draws:
        return "recorded before runs named their code (no commit, no draws fingerprint)"
    said = f"commit {short_commit(code)}"
    return said + (f", draws {draws['id']}" if draws else ", no draws fingerprint")


def provenance_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two runs' ``config.json`` in the code and the draws, in words
    (empty when both record the same commit, a clean tree and the same draws).

    A run that records nothing is said to, since nothing can then be known to agree."""
    said: list[str] = []
    code_a, code_b = a.get(CODE_KEY) or {}, b.get(CODE_KEY) or {}
    if not code_a.get("commit") or not code_b.get("commit"):
        said.append(f"code: {short_commit(code_a)} vs {short_commit(code_b)}")
    elif (code_a["commit"], code_a.get("clean")) != (code_b["commit"], code_b.get("clean")) \
            or not code_a.get("clean"):
        said.append(f"code: commit {short_commit(code_a)} vs {short_commit(code_b)}")
    draws_a, draws_b = a.get(DRAWS_KEY) or {}, b.get(DRAWS_KEY) or {}
    if not draws_a or not draws_b:
        said.append("draws: not recorded" + ("" if draws_a or draws_b else " by either run"))
    else:  # the id is a hash of the rest: the parts themselves say what differs
        said += [f"draws.{key}: {draws_a.get(key)!r} vs {draws_b.get(key)!r}"
                 for key in sorted((set(draws_a) | set(draws_b)) - {"id"})
                 if draws_a.get(key) != draws_b.get(key)]
    return said
