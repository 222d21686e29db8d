"""A guard against TRL changing under us.

Every keyword argument that the notebooks (``notebooks/*.py``) and the scale-out scripts
(``scripts/**/*.py``) pass to ``GRPOConfig(...)`` or ``GRPOTrainer(...)`` must still exist in the
installed TRL: a field of the ``GRPOConfig`` dataclass, a parameter of ``GRPOTrainer.__init__``.
TRL renames and removes arguments between releases (``max_prompt_length`` went in 1.x,
``tokenizer`` became ``processing_class``), and a notebook only finds out when a learner runs it.

The calls are found statically with ``ast``: nothing is executed. ``**settings`` is resolved
when ``settings`` is a ``dict(...)`` or ``{...}`` literal (plus ``settings["key"] = ...`` and
``settings.update(key=...)``) in the same file; anything else is reported as uncheckable, so pass
keywords explicitly. A call that shows a removed argument on purpose (notebook 10 shows
``max_prompt_length`` raising a ``TypeError``) carries the comment ``# unknown on purpose`` on its
first line; for those the guard checks the opposite: that TRL really rejects them.

Also here: the accelerate configs in ``scripts/accelerate/`` load with the installed
accelerate, and the README names the TRL version these checks last passed with.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import pytest

trl = pytest.importorskip("trl")

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((REPO_ROOT / "notebooks").glob("*.py")) + sorted(
    (REPO_ROOT / "scripts").rglob("*.py"))
# files that must call both (so the guard can never pass by finding nothing)
MUST_CALL = ("notebooks/10_trl.py", "scripts/trl_mbpp.py")
ON_PURPOSE = "# unknown on purpose"
README_LINE = re.compile(r"TRL version last checked:\s*`?([0-9]+(?:\.[0-9A-Za-z+-]+)*)")


class Keyword(NamedTuple):
    callee: str  # "GRPOConfig" or "GRPOTrainer"
    name: str  # the keyword, or "**<expression>" when it could not be resolved
    line: int
    on_purpose: bool = False  # the call's first line says ON_PURPOSE


def accepted_keywords() -> dict[str, set[str]]:
    """What the installed TRL accepts: GRPOConfig's init fields, GRPOTrainer.__init__'s params."""
    config = {field.name for field in dataclasses.fields(trl.GRPOConfig) if field.init}
    parameters = inspect.signature(trl.GRPOTrainer.__init__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        pytest.fail("GRPOTrainer.__init__ now takes **kwargs: this guard needs a new approach")
    trainer = {p.name for p in parameters if p.name != "self"}
    return {"GRPOConfig": config, "GRPOTrainer": trainer}


def _callee(node: ast.Call) -> str | None:
    name = node.func.id if isinstance(node.func, ast.Name) else (
        node.func.attr if isinstance(node.func, ast.Attribute) else None)
    return name if name in ("GRPOConfig", "GRPOTrainer") else None


def _literal_keys(value: ast.AST) -> list[str] | None:
    """Keys of ``dict(a=..., b=...)`` or ``{"a": ..., "b": ...}``; None for anything else."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id == "dict" and not value.args:
        keys = [k.arg for k in value.keywords]
        return None if None in keys else keys
    if isinstance(value, ast.Dict) and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys):
        return [k.value for k in value.keys]
    return None


def _dict_keys(tree: ast.AST) -> dict[str, list[str] | None]:
    """For every name built as a literal dict in ``tree``: all keys it may hold (None:
    something was added that cannot be read statically)."""
    keys: dict[str, list[str] | None] = {}

    def add(name: str, found: list[str] | None) -> None:
        if name in keys and keys[name] is None:
            return
        keys[name] = None if found is None else [*keys.get(name, []), *found]

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    add(target.id, _literal_keys(node.value))
                elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    key = target.slice
                    literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
                    add(target.value.id, [key.value] if literal else None)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "update" and isinstance(node.func.value, ast.Name):
            found = [k.arg for k in node.keywords]
            if node.args or None in found:
                found = None
            add(node.func.value.id, found)
    return keys


def trl_keywords(source: str, filename: str = "<source>") -> list[Keyword]:
    """Every keyword passed to a GRPOConfig/GRPOTrainer call in ``source``."""
    tree = ast.parse(source, filename=filename)
    lines = source.splitlines()
    dicts = _dict_keys(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or (callee := _callee(node)) is None:
            continue
        marked = ON_PURPOSE in lines[node.lineno - 1]
        for keyword in node.keywords:
            if keyword.arg is not None:
                found.append(Keyword(callee, keyword.arg, node.lineno, marked))
                continue
            expanded = keyword.value
            names = dicts.get(expanded.id) if isinstance(expanded, ast.Name) else None
            if names is None:
                found.append(Keyword(callee, f"**{ast.unparse(expanded)}", node.lineno, marked))
            else:
                found.extend(Keyword(callee, name, node.lineno, marked) for name in names)
    return found


def unknown_keywords(keywords: Iterable[Keyword]) -> list[Keyword]:
    """The keywords the installed TRL does not accept (or that cannot be checked)."""
    accepted = accepted_keywords()
    return [k for k in keywords if k.name not in accepted[k.callee]]


def _relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


# ----------------------------------------------------------------------------- the real files


@pytest.mark.parametrize("required", MUST_CALL)
def test_the_guard_finds_the_trl_calls(required):
    keywords = trl_keywords((REPO_ROOT / required).read_text(), required)
    callees = {k.callee for k in keywords}
    assert callees == {"GRPOConfig", "GRPOTrainer"}, f"{required} calls {callees or 'neither'}"
    assert sum(k.callee == "GRPOConfig" for k in keywords) >= 10  # the settings, made explicit


@pytest.mark.parametrize("path", SOURCES, ids=_relative)
def test_every_trl_argument_still_exists(path):
    keywords = trl_keywords(path.read_text(), str(path))
    bad = [k for k in unknown_keywords(keywords) if not k.on_purpose]
    assert not bad, (
        f"{_relative(path)} passes arguments that TRL {trl.__version__} does not accept: "
        + ", ".join(f"{k.callee}({k.name}=...) on line {k.line}" for k in bad)
        + " (renamed or removed? see TRL's release notes; '**x' means: pass keywords explicitly)"
    )


@pytest.mark.parametrize("path", SOURCES, ids=_relative)
def test_calls_marked_unknown_on_purpose_are_still_rejected(path):
    keywords = trl_keywords(path.read_text(), str(path))
    marked_lines = {k.line for k in keywords if k.on_purpose}
    rejected_lines = {k.line for k in unknown_keywords(keywords) if k.on_purpose}
    assert marked_lines == rejected_lines, (
        f"{_relative(path)}: calls on lines {sorted(marked_lines - rejected_lines)} are marked "
        f"{ON_PURPOSE!r} but TRL {trl.__version__} accepts all their arguments")


# ----------------------------------------------------------------------------- the guard itself


def test_the_guard_reports_removed_renamed_and_misspelled_arguments():
    source = (
        "from trl import GRPOConfig, GRPOTrainer\n"
        "import trl\n"
        "config = GRPOConfig(output_dir='x', beta=0.0, max_prompt_length=256)\n"
        "settings = dict(num_generations=8, loss_typ='grpo')\n"
        "settings['epsilon'] = 0.2\n"
        "trainer = trl.GRPOTrainer(model='m', tokenizer=None, args=GRPOConfig(**settings))\n"
    )
    found = trl_keywords(source)
    assert {k.name for k in found} >= {"output_dir", "beta", "num_generations", "epsilon",
                                       "model", "args"}
    bad = {(k.callee, k.name, k.line) for k in unknown_keywords(found)}
    assert bad == {("GRPOConfig", "max_prompt_length", 3), ("GRPOConfig", "loss_typ", 6),
                   ("GRPOTrainer", "tokenizer", 6)}


def test_the_guard_honours_the_on_purpose_marker():
    source = (f"GRPOConfig(max_prompt_length=1)  {ON_PURPOSE}\n"
              "GRPOConfig(max_prompt_length=2)\n")
    found = trl_keywords(source)
    assert [(k.line, k.on_purpose) for k in unknown_keywords(found)] == [(1, True), (2, False)]


def test_the_guard_refuses_arguments_it_cannot_read():
    source = "settings = make()\nGRPOConfig(**settings)\nGRPOConfig(**{**a})\n"
    bad = unknown_keywords(trl_keywords(source))
    assert [k.name for k in bad] == ["**settings", "**{**a}"]


# ----------------------------------------------------------------------------- configs, README


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "scripts" / "accelerate").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_accelerate_configs_load(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    assert config.num_processes >= 2 and config.num_machines == 1
    assert config.distributed_type.value in ("MULTI_GPU", "DEEPSPEED", "FSDP")


def test_readme_names_the_trl_version_last_checked():
    match = README_LINE.search((REPO_ROOT / "README.md").read_text())
    assert match, "README.md should say 'TRL version last checked: <version>'"
    if match.group(1) != trl.__version__:
        warnings.warn(
            f"README.md says TRL {match.group(1)} was last checked; {trl.__version__} is "
            "installed and passes these checks: update the README line", stacklevel=1)
