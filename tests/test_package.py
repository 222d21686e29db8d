"""The package's shape: every advertised name resolves, and the layers import what they should."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import grpo_core

CONTRACT = [
    "group_advantages",
    "sequence_logprob",
    "policy_gradient_loss",
    "clipped_surrogate",
    "kl_k3",
    "grpo_loss",
    "run_tests",
    "load_policy",
    "get_profile",
]


@pytest.mark.parametrize("name", grpo_core.__all__)
def test_every_exported_name_resolves(name):
    assert getattr(grpo_core, name) is not None


def test_contract_names_are_exported():
    assert set(CONTRACT) <= set(grpo_core.__all__)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'calc_adv'"):
        grpo_core.calc_adv  # noqa: B018


def _modules_loaded_by(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "statement",
    ["import grpo_core", "import grpo_core.profiles", "from grpo_core.sandbox import run_tests"],
)
def test_light_imports_do_not_pull_torch(statement):
    loaded = _modules_loaded_by(statement)
    assert "torch" not in loaded and "transformers" not in loaded


@pytest.mark.parametrize("module", ["advantages", "logprobs", "loss", "imitation_signals",
                                    "preference", "kl_gradients", "sampling_correction"])
def test_update_math_imports_torch_but_no_model_library(module):
    loaded = _modules_loaded_by(f"import grpo_core.{module}")
    assert "torch" in loaded
    assert not {"transformers", "trl", "datasets"} & loaded


@pytest.mark.parametrize("statement", ["import grpo_core.run_files", "import grpo_core.diagnosis",
                                       "import grpo_core.findings", "import grpo_core.stats",
                                       "import grpo_core.rewards", "import grpo_core.tables"])
def test_file_reading_checks_and_rewards_pull_no_torch(statement):
    loaded = _modules_loaded_by(statement)
    assert "torch" not in loaded and "transformers" not in loaded


@pytest.mark.parametrize("module", ["scoring", "evaluation", "group_signal", "plots", "diagnosis",
                                    "findings", "stats",
                                    "widgets", "experiments"])
def test_views_and_reward_calls_never_import_the_loop_unless_they_run_it(module):
    """Reward calling, the evaluator and the views stand apart from the training loop; only
    ``experiments`` (which builds the loop's ``TrainConfig``) may import it."""
    loaded = _modules_loaded_by(f"import grpo_core.{module}")
    assert ("grpo_core.loop" in loaded) == (module == "experiments")
    assert "grpo_core.cli" not in loaded


def test_train_is_the_training_function_after_every_submodule_is_imported():
    """``from grpo_core import train`` must not turn into a module once some cell imported a
    submodule (the command line is ``grpo_core.cli``, not a ``grpo_core.train`` module)."""
    code = (
        "import importlib, pkgutil, grpo_core\n"
        "names = [m.name for m in pkgutil.walk_packages(grpo_core.__path__, 'grpo_core.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names: importlib.import_module(name)\n"
        "from grpo_core import train\n"
        "from grpo_core.loop import train as loop_train\n"
        "print(len(names), callable(train), train is loop_train, grpo_core.train is loop_train)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, *checks = out.stdout.split()
    assert int(count) > 20 and checks == ["True", "True", "True"]


REPO = Path(__file__).resolve().parent.parent
# run with -S (no site-packages, so no editable-install hook and no .pth files), then the
# wheel's files first and the virtual environment's plain site-packages (torch...) after them
FROM_WHEEL = """
import sys
sys.path[:] = [p for p in sys.path if p and not p.startswith({repo!r})]
sys.path.insert(0, {site!r})
sys.path.append({purelib!r})
import grpo_core
assert grpo_core.__file__.startswith({site!r}), grpo_core.__file__
"""


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory):
    """The wheel built from this checkout, unpacked into a folder of its own (a pure-Python
    wheel unpacked is what pip installs)."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # a copy: the build writes build/ beside the sources, never here
    shutil.copytree(REPO / "grpo_core", source / "grpo_core",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(out), str(source)],
                   check=True, capture_output=True, cwd=out)
    (wheel,) = out.glob("grpo_course-*.whl")
    site = out / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
        names = set(archive.namelist())
    return site, names


def test_the_wheel_holds_the_whole_package_and_its_data(wheel_site):
    _, names = wheel_site
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "grpo_core").rglob("*.py")}
    packaged = {name for name in names if name.startswith("grpo_core/") and name.endswith(".py")}
    assert packaged == sources, (sorted(sources - packaged), sorted(packaged - sources))
    assert {"grpo_core/data/problems.jsonl", "grpo_core/data/prompts_exp1.jsonl"} <= names
    assert not any(name.startswith(("tests/", "notebooks/", "data/")) for name in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert metadata  # runtime requirements only: test and lab tools sit behind extras
    with zipfile.ZipFile(next(wheel_site[0].parent.glob("*.whl"))) as archive:
        requires = [line for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    plain = [line for line in requires if "extra ==" not in line]
    assert any("torch" in line for line in plain)
    assert not [line for line in plain if any(tool in line for tool in
                                             ("pytest", "nbval", "ruff", "jupyterlab", "hypothesis"))]


@pytest.mark.model
@pytest.mark.slow
def test_the_wheel_alone_scores_code_and_runs_a_smoke_step(wheel_site, tmp_path):
    site, _ = wheel_site
    purelib = sysconfig.get_paths()["purelib"]  # this interpreter's; -S would not find it
    code = FROM_WHEEL.format(repo=str(REPO), site=str(site), purelib=purelib) + f"""
from grpo_core.rewards import unit_test_reward
print("score", unit_test_reward(["```python\\ndef add(a, b):\\n    return a + b\\n```"],
                                tests=[["assert add(1, 2) == 3", "assert add(0, 0) == 0"]])[0])
from grpo_core.run_files import RunsNotFoundError, runs_dir
try:
    runs_dir()
except RunsNotFoundError as error:
    print("runs:", error)
from grpo_core.cli import main
print("exit", main(["length", "--profile", "smoke", "--steps", "1", "--no-checkpoint",
                    "--quiet", "--out", {str(tmp_path / "run")!r}]))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRPO_RUNS_DIR")}
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "score 1.0" in out.stdout
    assert "runs: the recorded runs live in the course's repository" in out.stdout
    assert "exit 0" in out.stdout
    steps = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(steps) == 1 and json.loads(steps[0])["step"] == 1


# Standard-library modules that Python 3.12 and 3.13 removed (PEP 594's dead batteries,
# distutils, imp, asynchat/asyncore/smtpd): Colab runs Python 3.13 and the main venv may not,
# so the course's own code is kept free of them by reading its imports.
REMOVED_BY_3_13 = frozenset({
    "aifc", "asynchat", "asyncore", "audioop", "cgi", "cgitb", "chunk", "crypt", "distutils",
    "imghdr", "imp", "lib2to3", "mailcap", "msilib", "nis", "nntplib", "ossaudiodev", "pipes",
    "smtpd", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib"})


def test_no_code_imports_a_module_python_3_13_removed():
    import ast

    root = Path(__file__).resolve().parent.parent
    files = [p for folder in ("grpo_core", "tools", "scripts", "benchmarks", "tests", "notebooks",
                              "solutions")
             for p in (root / folder).rglob("*.py")]
    assert len(files) > 50
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module
                     and not node.level else [])
            found += [f"{path.relative_to(root)}: {name}" for name in names
                      if name.split(".")[0] in REMOVED_BY_3_13]
    assert not found, f"imports of modules Python 3.13 removed: {found}"


COURSE_FOLDERS = ("grpo_core", "tools", "scripts", "benchmarks", "tests", "notebooks", "solutions")


def compile_warnings(paths: list[Path]) -> list[str]:
    """What compiling each file warns, as ``path: message``: an invalid escape in a string is a
    DeprecationWarning up to Python 3.11 and a SyntaxWarning since 3.12 (Colab's 3.13)."""
    import warnings

    found = []
    for path in paths:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compile(path.read_text(), str(path), "exec", dont_inherit=True)
        found += [f"{path}: {w.category.__name__}: {w.message}" for w in caught]
    return found


def test_the_course_code_compiles_without_a_warning():
    root = Path(__file__).resolve().parent.parent
    files = [p for folder in COURSE_FOLDERS for p in (root / folder).rglob("*.py")]
    assert len(files) > 50
    assert compile_warnings(files) == []


def test_compile_warnings_finds_an_invalid_escape(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('PATTERN = "\\d+ steps"\nRAW = r"\\d"\n')
    (found,) = compile_warnings([bad])
    assert "invalid escape sequence" in found and "bad.py" in found


def test_importing_every_module_of_the_package_warns_nothing_from_the_course():
    """Every ``grpo_core`` module imported in a fresh interpreter with every warning shown; a
    warning a course file raises fails (a library's own warnings are not the course's)."""
    root = Path(__file__).resolve().parent.parent
    script = (
        "import importlib, pkgutil, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import grpo_core\n"
        "    for module in pkgutil.walk_packages(grpo_core.__path__, 'grpo_core.'):\n"
        "        if not module.name.endswith('__main__'):  # it runs the command line\n"
        "            importlib.import_module(module.name)\n"
        "for w in caught:\n"
        "    print(f'{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "PYTHONWARNINGS": ""}, timeout=300)
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stdout.splitlines()
            if f"{os.sep}grpo_core{os.sep}" in line.split(":")[0]]
    assert ours == []


def test_every_export_is_in_the_contract_or_imported_from_the_package_somewhere():
    """``grpo_core``'s top-level names are the contract and what code outside the package
    imports from it (``from grpo_core import x`` or ``grpo_core.x``), nothing more."""
    import re

    root = Path(__file__).resolve().parent.parent
    sources = [path.read_text(errors="replace")
               for folder in ("notebooks", "tests", "tools", "scripts", "benchmarks", "solutions")
               for path in (root / folder).rglob("*.py")]
    used = set()
    for text in sources:
        for wrapped, inline in re.findall(r"from grpo_core import (?:\(([^)]*)\)|([\w ,]+))",
                                          text):
            used |= set(re.findall(r"\w+", wrapped or inline))
        used |= set(re.findall(r"\bgrpo_core\.(\w+)\b(?!\.)", text))
    unused = sorted(set(grpo_core.__all__) - used - set(CONTRACT))
    assert not unused, f"exported but imported from grpo_core nowhere: {unused}"
