"""Colab's runtime, rebuilt here: Python 3.13 and every package of Colab's published freeze.

``make test-colab`` checks the Colab setup (``tools/colab_setup.py``) in an environment that
holds what a fresh Colab GPU runtime holds, as Google publishes it in googlecolab/backend-info
(``pip-freeze.gpu.txt``, copied with its source commit and date into
``tools/colab/pip-freeze.gpu.txt``). Two kinds of package go in:

* **installed for real**, at Colab's exact version: everything the course's notebooks, its
  Colab tests and pip's resolver can load (the dependency closure of :data:`IMPORTED`), and
  torch 2.11.0 (Colab's version; the package index's CUDA build, which runs on the CPU);
* **as their metadata only** (a ``.dist-info`` folder with Colab's ``METADATA``: name,
  version, ``Requires-Dist``, ``Requires-Python``): the other ~570 (TensorFlow, JAX, gradio,
  RAPIDS, ...). Pip decides conflicts from metadata alone, so the setup's install sees every
  requirement Colab's packages state (gradio's ``huggingface-hub<2.0`` among them) and prints
  the same ERROR it would print on Colab, without ~20 GB of wheels no notebook imports. They
  lie outside ``sys.path`` (:func:`metadata_only_dir`), on ``PYTHONPATH`` only while the setup
  runs.

``check`` then runs the setup as a notebook's first cell runs it (Colab's marker faked, what a
Colab kernel has imported on its input) and fails on a pip ERROR or conflict, on a changed
Colab package that :data:`tools.colab_setup.NOTEBOOK_NEEDS` does not name, on a restart the
notebook does not need, and on a second run that is not a no-op.

What this leaves out: the six entries installed from URLs (RAPIDS wheels from NVIDIA's index,
a spaCy model, Colab's own ``google-colab`` and kernel gateway, whose marker the check fakes),
Debian's ``python-apt``, Colab's GPU and its CUDA 12.8 build of torch.

    python tools/colab_env.py build VENV      # the environment (make test-colab calls it)
    python tools/colab_env.py check VENV [--notebook STEM]   # the setup, judged
    python tools/colab_env.py refresh FREEZE --commit SHA --date YYYY-MM-DD
                                              # a newer freeze: copy it, read its metadata

``refresh`` reads each package's metadata from the package index (the wheel's own
``METADATA``: the ``.metadata`` file beside it, or the file read out of the wheel by range
requests; an sdist's ``PKG-INFO`` when there is no wheel) into ``tools/colab/metadata.json``,
so that ``build`` needs the index only for the packages it installs for real.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement

try:  # run as a script (python tools/colab_env.py) or imported as tools.colab_env
    from tools.colab_setup import RESTART_EXIT, changes, may_change
except ImportError:  # pragma: no cover - the script's own folder is on sys.path instead
    from colab_setup import RESTART_EXIT, changes, may_change

ROOT = Path(__file__).resolve().parent.parent
COLAB_DIR = ROOT / "tools" / "colab"
FREEZE = COLAB_DIR / "pip-freeze.gpu.txt"
METADATA = COLAB_DIR / "metadata.json"
INDEX = "https://pypi.org/simple"
# what a notebook, a Colab test or the setup's pip loads: installed for real, with everything
# they require (torch is installed on its own: the index's build, not Colab's +cu128 one)
IMPORTED = ("ipywidgets", "ipykernel", "ipython", "notebook", "jupyter-client", "matplotlib",
            "pandas", "pyarrow", "numpy", "tqdm", "transformers", "accelerate", "datasets",
            "peft", "safetensors", "huggingface-hub", "tokenizers", "pyyaml", "requests",
            "pip", "setuptools", "wheel")
TORCH = "torch==2.11.0"
# torch and what only torch's CUDA build needs: they come with TORCH, not from the freeze
TORCH_FAMILY = re.compile(r"^(torch|torchvision|torchaudio|torchcodec|triton|nvidia-.*|cuda-.*)$")
# the environment markers of Colab's runtime (os-info-gpu.txt: Ubuntu 22.04, Python 3.13.15)
COLAB_MARKERS = {"python_version": "3.13", "python_full_version": "3.13.15",
                 "sys_platform": "linux", "platform_system": "Linux",
                 "platform_machine": "x86_64", "os_name": "posix",
                 "implementation_name": "cpython", "platform_python_implementation": "CPython",
                 "extra": ""}
STUB_INSTALLER = "colab-freeze-metadata"


def canonical(name: str) -> str:
    """PEP 503's normalized name: ``Jinja2`` and ``jinja_2`` are ``jinja2``/``jinja-2``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_freeze(text: str) -> dict[str, str]:
    """``{canonical name: version}`` of a ``pip freeze`` listing's ``name==version`` lines.

    Lines installed from a URL (``name @ url``) and comments are left out; see the module
    docstring for what that leaves out of the check.
    """
    pins: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "==" not in line:
            continue
        name, version = line.split("==", 1)
        pins[canonical(name)] = version.strip()
    return pins


def requirement_names(requires_dist: Iterable[str],
                      markers: Mapping[str, str] = COLAB_MARKERS) -> list[str]:
    """The canonical names ``requires_dist`` asks for under ``markers`` (no extras)."""
    names = []
    for line in requires_dist:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(dict(markers)):
            names.append(canonical(requirement.name))
    return names


def closure(roots: Iterable[str], metadata: Mapping[str, Mapping]) -> set[str]:
    """``roots`` and everything they require, transitively, among the freeze's packages."""
    seen: set[str] = set()
    todo = [canonical(root) for root in roots]
    while todo:
        name = todo.pop()
        if name in seen or name not in metadata:
            continue
        seen.add(name)
        todo.extend(requirement_names(metadata[name]["requires_dist"]))
    return seen


def installed_for_real(pins: Mapping[str, str], metadata: Mapping[str, Mapping]) -> list[str]:
    """``name==version`` of the freeze's packages that :func:`build` installs with their code."""
    real = closure(IMPORTED, metadata)
    return sorted(f"{name}=={pins[name]}" for name in real
                  if name in pins and not TORCH_FAMILY.match(name))


def stub_metadata(entry: Mapping) -> str:
    """A ``METADATA`` file that states ``entry``'s name, version and requirements."""
    lines = ["Metadata-Version: 2.1", f"Name: {entry['name']}", f"Version: {entry['version']}"]
    if entry.get("requires_python"):
        lines.append(f"Requires-Python: {entry['requires_python']}")
    lines += [f"Requires-Dist: {requirement}" for requirement in entry["requires_dist"]]
    return "\n".join(lines) + "\n"


def write_stub(site_packages: Path, entry: Mapping) -> Path:
    """An installed distribution with ``entry``'s metadata and no code; pip can uninstall it."""
    folder_name = f"{re.sub(r'[^A-Za-z0-9.]+', '_', entry['name'])}-{entry['version']}.dist-info"
    folder = site_packages / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_text(stub_metadata(entry))
    (folder / "INSTALLER").write_text(STUB_INSTALLER + "\n")
    (folder / "RECORD").write_text("".join(f"{folder_name}/{name},,\n"
                                           for name in ("METADATA", "INSTALLER", "RECORD")))
    return folder


def metadata_only_dir(venv: Path) -> Path:
    """Where the metadata-only packages lie: outside ``sys.path``, so that no library's
    "is X installed?" (torch asks ``importlib.metadata`` for optree) mistakes one for code;
    :func:`check` puts it on ``PYTHONPATH`` for the setup, whose pip must see them all."""
    return venv / "colab-metadata"


def installed_names(python: Path) -> set[str]:
    listing = subprocess.run([str(python), "-c", "from importlib import metadata\n"
                              "print('\\n'.join(d.metadata['Name'] for d in metadata.distributions()))"],
                             check=True, capture_output=True, text=True).stdout
    return {canonical(name) for name in listing.split()}


def pip(python: Path, *args: str, pip_opts: Iterable[str] = ()) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *pip_opts, *args], check=True)


def build(venv: Path, pip_opts: Iterable[str] = ()) -> None:
    """Colab's runtime in ``venv`` (which must exist, made by the Python to test with)."""
    python = venv / "bin" / "python"
    pins = read_freeze(FREEZE.read_text())
    metadata = json.loads(METADATA.read_text())
    real = installed_for_real(pins, metadata)
    print(f"colab env: pip {pins['pip']}, {TORCH} with its own CUDA libraries, "
          f"{len(real)} of Colab's {len(pins)} packages for real", flush=True)
    pip(python, f"pip=={pins['pip']}", pip_opts=pip_opts)
    pip(python, TORCH, pip_opts=pip_opts)
    pip(python, "--no-deps", *real, pip_opts=pip_opts)
    have = installed_names(python)
    stubs = [name for name in pins if name not in have and name in metadata]
    for name in stubs:
        write_stub(metadata_only_dir(venv), metadata[name])
    unread = sorted(set(pins) - set(metadata))
    print(f"colab env: {len(stubs)} more as their metadata only"
          + (f"; no metadata for {', '.join(unread)}" if unread else ""), flush=True)


# what a Colab kernel has imported when the first cell runs: Colab's marker (faked, as
# tests/test_colab.py fakes it) and the preinstalled libraries a kernel loads at start
KERNEL_MODULES = ("import sys, types; sys.modules['google.colab'] = types.ModuleType('google.colab'); "
                  "import ipywidgets, matplotlib, numpy, pandas, torch, tqdm; "
                  "print('\\n'.join(sys.modules))")
# what pip prints when an install leaves a package's requirement unmet or cannot resolve one
PIP_TROUBLE = re.compile(r"^ERROR|incompatible|but you have|conflict|not installed",
                         re.IGNORECASE)
# one unmet requirement, as `pip install` ("X 1.0 requires Y<2, but you have Y 2.1 which is
# incompatible.") and `pip check` ("X 1.0 has requirement Y<2, but you have Y 2.1.") word it
UNMET = re.compile(r"^(?P<package>\S+) \S+ (?:requires|has requirement) (?P<required>[A-Za-z0-9._-]+)")
# the line pip puts above the unmet requirements it lists
CONFLICTS_HEADER = "ERROR: pip's dependency resolver does not currently take into account"


def unmet_requirements(output: str) -> set[tuple[str, str]]:
    """``{(package, the package it requires)}`` of every unmet requirement pip lists."""
    found = set()
    for line in output.splitlines():
        match = UNMET.match(line.strip())
        if match:
            found.add((canonical(match["package"]), canonical(match["required"])))
    return found


def setup_problems(output: str, status: int, changed: Mapping[str, tuple[str, str]],
                   allowed: Mapping[str, str], restart_allowed: bool,
                   unmet_before: set[tuple[str, str]] = frozenset()) -> list[str]:
    """What is wrong with one run of the setup, from its output, exit status and changes.

    ``unmet_before``: what ``pip check`` listed before the setup ran. The rebuilt runtime has
    conflicts of its own that Colab does not (the index's torch is a CUDA 13 build, so
    RAPIDS' ``cuda-toolkit==12.*`` is unmet); pip repeats them when the setup touches a
    package near them, and they are not the setup's doing. Every other pip complaint is.
    """
    lines = [line.strip() for line in output.splitlines() if PIP_TROUBLE.search(line)]
    listed_before = [line for line in lines
                     if line.startswith(CONFLICTS_HEADER) or (UNMET.match(line) and
                                                              unmet_requirements(line) <= unmet_before)]
    new_conflicts = [line for line in lines if line not in listed_before]
    problems = [f"pip reported trouble: {line}" for line in new_conflicts]
    problems += [f"changed {name} {old} -> {new}, which the setup may not change"
                 for name, (old, new) in sorted(changed.items()) if name not in allowed]
    if status == RESTART_EXIT and not restart_allowed:
        problems.append("asked for a restart")
    elif status not in (0, RESTART_EXIT):
        problems.append(f"exited with status {status}")
    return problems


def colab_versions(python: Path, venv: Path) -> dict[str, str]:
    """``{canonical name: version}`` of everything installed, metadata-only packages included."""
    listing = subprocess.run([str(python), "-c", "from importlib import metadata\n"
                              "for d in metadata.distributions(): print(d.metadata['Name'], d.version)"],
                             check=True, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(metadata_only_dir(venv))}).stdout
    return {canonical(name): version for name, version in
            (line.split(" ", 1) for line in listing.splitlines() if " " in line)}


def run_setup(python: Path, venv: Path, notebook: str | None) -> tuple[int, str]:
    """One run of the setup as a first cell runs it: ``(exit status, what it printed)``."""
    loaded = subprocess.run([str(python), "-c", KERNEL_MODULES], check=True,
                            capture_output=True, text=True).stdout
    command = [str(python), str(ROOT / "tools" / "colab_setup.py")]
    command += ["--notebook", notebook] if notebook else []
    done = subprocess.run(command, input=loaded, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(metadata_only_dir(venv))})
    return done.returncode, done.stdout + done.stderr


def check(venv: Path, notebook: str | None) -> int:
    """Run the setup twice in ``venv`` and judge it (module docstring); 0 when it passed."""
    python = venv / "bin" / "python"
    allowed = may_change(notebook)
    restart_expected = bool(allowed)  # a notebook whose install may change packages
    problems: list[str] = []
    unmet_before = unmet_requirements(subprocess.run(
        [str(python), "-m", "pip", "check"], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(metadata_only_dir(venv))}).stdout)
    print(f"colab setup check: pip check lists {len(unmet_before)} unmet requirements before "
          "the setup runs (the rebuilt runtime's own; the setup may not add one)")
    for attempt in (1, 2):
        before = colab_versions(python, venv)
        started = time.monotonic()
        status, output = run_setup(python, venv, notebook)
        changed = changes(before, colab_versions(python, venv))
        shown = [line for line in output.splitlines()
                 if not line.startswith("WARNING: Location")]  # this machine's extra indexes
        print(f"--- setup run {attempt} for {notebook or 'every notebook'}: status {status}, "
              f"{time.monotonic() - started:.0f} s; its last lines:")
        print("\n".join(shown[-6:]))
        for name, (old, new) in sorted(changed.items()):
            print(f"    changed {name} {old} -> {new}: {allowed.get(name, 'NOT ALLOWED')}")
        problems += [f"run {attempt}: {problem}" for problem in setup_problems(
            output, status, changed, allowed, attempt == 1 and restart_expected, unmet_before)]
        if attempt == 2 and changed:
            problems.append("run 2: the second run changed packages again")
    print("colab setup check: " + ("passed" if not problems else "FAILED\n  " + "\n  ".join(problems)))
    return 1 if problems else 0


# ------------------------------------------------------------------ refresh (needs the index)

def _get(url: str, headers: Mapping[str, str] | None = None) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=dict(headers or {})),
                                timeout=120) as response:
        return response.read()


class _RangeReader(io.RawIOBase):
    """A remote file read by HTTP range requests: enough for ``zipfile`` to find one member."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.position = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.position, 2: self.size}[whence]
        self.position = base + offset
        return self.position

    def readinto(self, buffer) -> int:
        if self.position >= self.size or len(buffer) == 0:
            return 0
        last = min(self.position + len(buffer), self.size) - 1
        data = _get(self.url, {"Range": f"bytes={self.position}-{last}"})
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def _file_version(filename: str) -> str:
    if filename.endswith(".whl"):
        return filename[:-4].split("-")[1]
    return filename[:-len(".tar.gz")].rsplit("-", 1)[-1]


def _wheel_rank(filename: str) -> int:
    """Prefer the file Colab would have installed: a CPython 3.13 x86_64 wheel."""
    if not filename.endswith(".whl"):
        return 9
    if "cp313" in filename and "x86_64" in filename:
        return 0
    return 1 if "none-any" in filename else 2 if "x86_64" in filename else 5


def _metadata_text(file: Mapping) -> str:
    if file["filename"].endswith(".whl"):
        try:
            return _get(file["url"] + ".metadata").decode()
        except OSError:  # no .metadata beside it: read METADATA out of the wheel itself
            wheel = zipfile.ZipFile(io.BufferedReader(_RangeReader(file["url"], file["size"])))
            name = next(n for n in wheel.namelist()
                        if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
            return wheel.read(name).decode()
    with tarfile.open(fileobj=io.BytesIO(_get(file["url"]))) as sdist:
        member = min((n for n in sdist.getnames() if n.endswith("PKG-INFO")),
                     key=lambda n: n.count("/"))
        return sdist.extractfile(member).read().decode()


def read_index_metadata(name: str, version: str) -> dict | None:
    """``name==version``'s metadata as the package index serves it, or None if it has no file."""
    listing = json.loads(_get(f"{INDEX}/{canonical(name)}/",
                              {"Accept": "application/vnd.pypi.simple.v1+json"}))
    public = version.split("+")[0]
    files = sorted((f for f in listing["files"] if f["filename"].endswith((".whl", ".tar.gz"))
                    and _file_version(f["filename"]) == public),
                   key=lambda f: _wheel_rank(f["filename"]))
    if not files:
        return None
    parsed = Parser().parsestr(_metadata_text(files[0]), headersonly=True)
    return {"name": parsed["Name"], "version": version,
            "requires_dist": parsed.get_all("Requires-Dist") or [],
            "requires_python": parsed["Requires-Python"], "read_from": files[0]["filename"]}


def refresh(freeze: Path, commit: str, date: str) -> None:
    """Copy a newer freeze into ``tools/colab/`` and read every package's metadata."""
    text = freeze.read_text()
    header = (f"# googlecolab/backend-info, pip-freeze.gpu.txt at commit {commit} ({date}),\n"
              "# copied by tools/colab_env.py refresh; tools/colab/metadata.json is read from it\n")
    pins = read_freeze(text)
    found: dict[str, dict] = {}
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        futures = {pool.submit(read_index_metadata, name, version): name
                   for name, version in pins.items()}
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            try:
                entry = future.result()
            except OSError as error:
                print(f"{name}: {error}", file=sys.stderr)
                continue
            if entry is not None:
                found[name] = entry
    COLAB_DIR.mkdir(exist_ok=True)
    FREEZE.write_text(header + text)
    METADATA.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    print(f"{len(found)} of {len(pins)} packages' metadata read; "
          f"none for {', '.join(sorted(set(pins) - set(found))) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="Colab's packages into an existing venv")
    build_parser.add_argument("venv", type=Path)
    build_parser.add_argument("--pip-opts", default="", help="extra pip options (PIP_OPTS)")
    check_parser = commands.add_parser("check", help="run the Colab setup in VENV and judge it")
    check_parser.add_argument("venv", type=Path)
    check_parser.add_argument("--notebook", help="the notebook stem the first cell passes")
    refresh_parser = commands.add_parser("refresh", help="copy a newer freeze, read its metadata")
    refresh_parser.add_argument("freeze", type=Path)
    refresh_parser.add_argument("--commit", required=True)
    refresh_parser.add_argument("--date", required=True)
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.venv, args.pip_opts.split())
    elif args.command == "check":
        return check(args.venv, args.notebook)
    else:
        refresh(args.freeze, args.commit, args.date)
    return 0


if __name__ == "__main__":
    sys.exit(main())
