"""``make mutate``: mutation testing of the modules that decide what a learner sees and what a
reward pays, with mutmut, and one line per module.

What is mutated and with which tests is configured in ``pyproject.toml`` only:
``[tool.mutmut]`` lists the modules (``only_mutate``) and the fast tests
(``pytest_add_cli_args_test_selection``); ``[tool.grpo_mutate]`` keeps a module to some of its
functions (``functions``) and sets the target. This script runs ``mutmut run`` on those
mutants (mutmut runs, for each one, only the tests that reach the mutated function), then
prints for every module::

    <module>: <killed>/<total> killed (<pct>%)

then every surviving mutant (its diff), each marked as explained when
``tests/mutation_survivors.md`` gives a reason for it (an equivalent mutant), and then that
file. It exits 1 when a module is below the target or a survivor is unexplained.

Usage: ``python tools/mutate.py [--max-children N] [--report-only] [module ...]``
(``--report-only`` re-reads the last run's results; modules as ``grpo_core/loss.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
SURVIVORS_FILE = ROOT / "tests" / "mutation_survivors.md"
# mutmut's exit codes (mutmut/stats.py): a failing test, an internal pytest error, a timeout
# (the mutant hung) or a crash all mean a test noticed the mutant
KILLED = {1, 3, 24, -24, 36, 152, 255, -11, -9}
STATUS = {0: "survived", 5: "no tests", 33: "no tests", None: "not checked"}
SEP = "\u01c1"  # mutmut's separator in a method's mangled name: x<SEP>Class<SEP>method


def load_config() -> tuple[list[str], dict[str, list[str]], float]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]
    modules = data["mutmut"]["only_mutate"]
    own = data.get("grpo_mutate", {})
    return modules, own.get("functions", {}), float(own.get("target_percent", 90))


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def patterns_for(path: str, functions: list[str] | None) -> list[str]:
    """mutmut's mutant-name globs for a module, or for some of its functions."""
    module = module_name(path)
    if not functions:
        return [f"{module}.*"]
    globs = []
    for function in functions:
        if "." in function:
            cls, method = function.split(".")
            globs.append(f"{module}.x{SEP}{cls}{SEP}{method}__mutmut_*")
        else:
            globs.append(f"{module}.x_{function}__mutmut_*")
    return globs


def function_of(mutant: str, module: str) -> str:
    """``grpo_core.loop.x_update__mutmut_3`` -> ``update``; methods as ``Class.method``."""
    name = mutant.removeprefix(module + ".").rsplit("__mutmut_", 1)[0]
    if name.startswith(f"x{SEP}"):
        return ".".join(name[2:].split(SEP))
    return name.removeprefix("x_")


def results(path: str, functions: list[str] | None) -> dict[str, int | None]:
    """Exit code by mutant name for the mutants in scope (from mutmut's ``.meta`` file)."""
    meta = ROOT / "mutants" / (path + ".meta")
    if not meta.exists():
        return {}
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    module = module_name(path)
    return {name: code for name, code in codes.items()
            if not functions or function_of(name, module) in functions}


def mutant_diff(name: str, path: str) -> list[str]:
    """The changed lines of a mutant (what ``mutmut show`` prints), as ``-old`` / ``+new``."""
    try:  # in this process: mutmut show costs a second per survivor
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        shown = get_diff_for_mutant(name, path=Path(path))
    except Exception:  # another mutmut version: its command line
        shown = subprocess.run([mutmut_command(), "show", name], cwd=ROOT, capture_output=True,
                               text=True, check=False).stdout
    return [line for line in shown.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def explained() -> list[tuple[str, str, str]]:
    """``(module, function, mutated line)`` glob patterns that ``tests/mutation_survivors.md``
    explains.

    An entry is a line ``- `<function>`: `<the mutated line>` <reason>`` under a
    ``## <module path>`` heading; function and line are glob patterns (``*`` for any)
    matched against the survivor's function and the ``+`` line of its diff, with runs of
    whitespace read as one space (``*`` is the only wildcard). Entries name the change, not the mutant's number, which
    changes whenever the module does."""
    entries, module = [], None
    text = SURVIVORS_FILE.read_text("utf-8") if SURVIVORS_FILE.exists() else ""
    for line in text.splitlines():
        if line.startswith("## "):
            module = line[3:].strip()
        found = re.match(r"- `([^`]+)`: `([^`]+)`", line)
        if found and module:
            entries.append((module, found.group(1), " ".join(found.group(2).split())))
    return entries


def is_explained(entries, path: str, function: str, added: str) -> bool:
    return bool(matching(entries, path, function, added))


def matching(entries, path: str, function: str, added: str) -> list[int]:
    """The indexes of the entries that explain this survivor."""
    return [k for k, (module, fn, line) in enumerate(entries)
            if _glob(module, path) and _glob(fn, function) and _glob(line, added)]


def _glob(pattern: str, text: str) -> bool:
    """``*`` matches anything; every other character (``[``, ``?``...) only itself."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, text, flags=re.DOTALL) is not None


def mutmut_command() -> str:
    beside = Path(sys.executable).with_name("mutmut")
    return str(beside) if beside.exists() else "mutmut"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="only these (e.g. grpo_core/loss.py)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--report-only", action="store_true",
                        help="print the last run's results without running mutmut")
    args = parser.parse_args(argv)
    modules, functions, target = load_config()
    unknown = [m for m in args.modules if m not in modules]
    if unknown:
        parser.error(f"not in [tool.mutmut] only_mutate: {unknown}")
    chosen = args.modules or modules

    if not args.report_only:
        globs = [g for path in chosen for g in patterns_for(path, functions.get(path))]
        env = {**os.environ, "GRPO_PROFILE": "smoke", "HF_HUB_OFFLINE": "1",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        run = subprocess.run([mutmut_command(), "run", "--max-children", str(args.max_children),
                              *globs], cwd=ROOT, env=env, capture_output=True, text=True)
        (ROOT / "mutants").mkdir(exist_ok=True)
        (ROOT / "mutants" / "last-run.log").write_text(run.stdout + run.stderr)
        if run.returncode != 0:
            print((run.stdout + run.stderr)[-4000:])
            print(f"mutmut run failed (exit {run.returncode}); full log: mutants/last-run.log")
            return run.returncode

    os.chdir(ROOT)  # mutmut reads its configuration and the mutants from here
    known = explained()
    low, unexplained, survivors = [], 0, []
    print()
    for path in chosen:
        scope = functions.get(path)
        codes = results(path, scope)
        killed = sum(code in KILLED for code in codes.values())
        total = len(codes)
        pct = 100.0 * killed / total if total else 0.0
        where = f" [{', '.join(scope)}]" if scope else ""
        print(f"{module_name(path)}: {killed}/{total} killed ({pct:.1f}%){where}")
        if pct < target:
            low.append(path)
        module = module_name(path)
        for name, code in sorted(codes.items(), key=lambda kv: _natural_key(kv[0])):
            if code not in KILLED:
                survivors.append((path, module, name, code))
    if survivors:
        print(f"\nsurvivors ({len(survivors)}):")
    used: set[int] = set()
    for path, module, name, code in survivors:
        diff = mutant_diff(name, path)
        added = " ".join(next((d[1:] for d in diff if d.startswith("+")), "").split())
        found = matching(known, path, function_of(name, module), added)
        used.update(found)
        ok = bool(found)
        unexplained += not ok
        mark = "explained" if ok else "NOT EXPLAINED"
        print(f"  {name} ({STATUS.get(code, code)}, {mark})")
        for line in diff:
            print(f"      {line.strip()}")
    if SURVIVORS_FILE.exists():
        print(f"\n--- {SURVIVORS_FILE.relative_to(ROOT)} ---")
        print(SURVIVORS_FILE.read_text("utf-8"))
    stale = [known[k] for k in range(len(known)) if k not in used]
    if stale and not args.modules:  # a full run: an entry that explains nothing is out of date
        print(f"entries in {SURVIVORS_FILE.relative_to(ROOT)} that no survivor matches "
              f"(killed now, or the code changed: check with the mutant switched on, then "
              f"remove or update them):")
        for module, fn, line in stale:
            print(f"  {module}: `{fn}`: `{line}`")
    if low:
        print(f"below the {target:.0f} % target: {', '.join(low)}")
    if unexplained:
        print(f"{unexplained} survivor(s) neither killed nor explained in "
              f"{SURVIVORS_FILE.relative_to(ROOT)}")
    return 1 if low or unexplained else 0


def _natural_key(name: str) -> tuple[str, int]:
    base, _, number = name.rpartition("__mutmut_")
    return base, int(number) if number.isdigit() else 0


if __name__ == "__main__":
    sys.exit(main())
