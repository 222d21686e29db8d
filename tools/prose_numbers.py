"""Every number typed in the course's prose comes from somewhere a test can read.

A rebuild changes what the cells print, a new run changes a recorded file; prose typed for an
earlier build then contradicts them. ``tests/test_prose_numbers.py`` runs this checker over

* every notebook's markdown cells (``notebooks/NN_*.ipynb``, ``notebooks/START_HERE.ipynb``),
* ``README.md``, ``data/README.md`` and ``docs/*.md``.

**The rules.** Every number read as a claim (below) must be, in this order:

1. *printed*: a code cell's output in the **same section** prints it. A section is the run of
   cells between two markdown headings of level 1 or 2 (``#``/``##``; a ``###`` does not cut
   one). Only notebooks have printed output. START_HERE has no code cells: its table is written
   by ``tools/notebooks.py start`` from ``notebooks/build_info.json``, so its printed text is
   that function's text, made afresh from the recorded file (:func:`start_page_output`).
2. *stated by the code*: a literal in the source of a code cell of the same section (an input
   the cell sets: a toy example's values, a setting it passes), read like printed output.
3. *an exercise's input*: in a section whose code cells call ``check("NN.name", ...)``, a
   number in that exercise's question, its judge's source or the module constants the judge
   reads (``grpo_core.exercises``): the fixed inputs the check is judged on.
4. *recorded* (the README files and ``docs/`` only): it appears in a file the same paragraph
   names (a repository path in a code span or link, e.g. ``data/runs/exp2-k8-cpu/`` or
   ``benchmarks/bench_step.py``; a folder counts all its text files), or in a file that the
   document declares for all its numbers with a line
   ``<!-- numbers: path [path ...] -->``.
5. *quoted*: listed in ``QUOTED`` (the test) as a :class:`Quote`: the number, a short excerpt
   of the prose around it (which must still be there: a stale entry is an error) and a source
   the test verifies (:meth:`Quote.verify`): ``setting`` (an attribute path imported and read,
   whose value must equal the number), ``file`` (a repository file the number appears in),
   ``link`` (a URL that must appear in the same paragraph), ``lecture`` (a lecture excerpt,
   checked against ``../shared/seed/`` only when that folder exists: a clean clone, as in CI,
   has no ``../shared``, so there only the prose excerpt is checked) or ``example`` (a
   hand-made example or arithmetic on one: only the excerpt is checked).

**Matching** respects number boundaries: ``0.15`` is not read inside ``0.154`` nor ``3``
inside ``13``, ``3.5`` or ``exp3``. Signs are ignored (prose says "a drop of 0.06" for a printed
``-0.06``); thousands separators are read (``1,000``). A prose number matches a printed one of the
same value written with at least as many decimals (``0.15`` matches ``0.15`` and ``0.150``, not
``0.154``: no rounding; ``88`` does not match ``88.3``). A percentage ``62 %`` matches a printed percentage (``62 %``, ``62%``,
``61.7%``) by the same rule, or a printed fraction with at least *d + 2* decimals that rounds to
it once multiplied by 100 (``0.62``, ``0.615``). A printed number is read like a prose one: not
inside a word (``exp3``), a version or a longer number.

**What is not a claim** (masked before numbers are read, :data:`MASKS`): formulas (``$...$``,
``$$...$$``), code spans and blocks, HTML comments and tags, link targets and URLs, heading
lines, list markers (``1.`` at a line's or a table cell's start), and these structural patterns: section, notebook,
experiment, exercise, equation, step, cell, issue, seed and similar references (``§7``,
``notebook 04``, ``sections 1-3``, ``Eq. (12.2)``, ``(8.4)``, ``step 20``), years (1990-2039), and
versions (``x.y.z``; a package's or Python's, CUDA's, a capability's ``name 1.16``). Numbers
inside a word (``Qwen3-0.6B``, ``float32``, ``exp2-k8``), ordinals (``2nd``), powers written with
superscripts (``10⁻⁴``) and operands of an operator with a symbol on its other side (``x − 1``,
``1/k``) are not read either.
"""

from __future__ import annotations

import functools
import importlib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
LECTURE = ROOT.parent / "shared" / "seed" / "000_77727c5a3e68b49e.txt"

# ---------------------------------------------------------------------------------------------
# What is not a claim

_PACKAGES = (
    "python|torch|pytorch|transformers|trl|accelerate|datasets|gguf|safetensors|tokenizers|numpy|"
    "pandas|matplotlib|tqdm|ipywidgets|jupyterlab|ipykernel|ipython|notebook|jupytext|nbclient|"
    "nbval|playwright|chromium|pytest|pytest-timeout|hypothesis|ruff|mutmut|vllm|peft|cuda|"
    "capability|version|versions|debian|ubuntu|nvidia-smi|driver|colab's|v")
_REFERENCES = (
    "§|sections?|notebooks?|experiments?|exercises?|eqs?\\.|equations?|steps?|cells?|issues?|"
    "items?|figures?|fig\\.|tables?|parts?|chapters?|lines?|seeds?|lectures?|slides?|tiers?|"
    "phases?|levels?|rounds?|questions?|examples?|option|problems?|tasks?|stages?|layers?|"
    "class(?:es)?|rows?")
_NUMBER_LIST = r"\d+(?:\.\d+)*(?:\s*(?:-|–|,|and|or|to)\s*\d+(?:\.\d+)*)*"

#: (name, pattern) pairs, applied in this order; what they match is blanked out.
MASKS: list[tuple[str, re.Pattern[str]]] = [
    ("html comment", re.compile(r"<!--.*?-->", re.S)),
    ("code block", re.compile(r"```.*?```", re.S)),
    ("display formula", re.compile(r"\$\$.*?\$\$", re.S)),
    ("formula", re.compile(r"\$[^$\n]+\$")),
    ("code span", re.compile(r"`[^`]+`")),
    ("link", re.compile(r"!?\[[^\]\n]*\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")),
    ("url", re.compile(r"https?://[^\s)>\]]+")),
    ("html tag", re.compile(r"<[^>\n]+>")),
    ("heading", re.compile(r"^ {0,3}#{1,6} .*$", re.M)),
    ("indented code", re.compile(r"^(?: {4}|\t)(?! *[-*+] | *\d+[.)] ).*$", re.M)),
    ("list marker", re.compile(r"(?:^|\|)\s*(?:\*\*)?\d+[.)](?:\*\*)?(?=\s)", re.M)),
    ("operator", re.compile(r"[A-Za-z)}⁰¹²³⁴⁵⁶⁷⁸⁹ᵢₜ]\s?[−+*/^]\s?\d+(?:\.\d+)?(?![\d.])"
                            r"|(?<![\d.])\d+(?:\.\d+)?\s?[−+*/^]\s?(?=[A-Za-z(√])")),
    ("power", re.compile(r"\d+(?:\.\d+)?\s?[×x·]?\s?(?:10)?[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+")),
    ("reference", re.compile(rf"(?i)(?<![\w-])(?:{_REFERENCES})\s*\(?{_NUMBER_LIST}\)?")),
    ("equation number", re.compile(r"\([1-9]\d?\.\d{1,2}\)")),
    ("version", re.compile(rf"(?i)(?<![\w-])(?:{_PACKAGES})\s*(?:>=|<=|==|~=|<|>)?\s*"
                           r"\d+(?:\.\d+)+(?:\+\w+)?")),
    ("dotted version", re.compile(r"(?<![\d.])\d+\.\d+\.\d+(?:\.\d+)*")),
    ("year", re.compile(r"(?<![\d.,])(?:199\d|20[0-3]\d)(?!\d|[.,]\d|\s?%)")),
]

_TOKEN = re.compile(r"\d{1,3}(?:[,\u202f\u2009 ]\d{3})+(?![\d.])|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# letters allowed right after a number (a unit or a multiplier); any other letter makes it a word
_UNIT = re.compile(r"(?:x|s|ms|min|h|GB|GiB|MB|MiB|KB|KiB|k|K|M|B|TB|TiB|W)(?![A-Za-z])")


def mask(markdown: str) -> str:
    """``markdown`` with everything that is not a claim replaced by spaces (offsets kept)."""
    text = markdown
    for _name, pattern in MASKS:
        text = pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return text


@dataclass(frozen=True)
class Number:
    """A number as read: its text, absolute value, decimals and whether it is a percentage."""

    text: str
    value: float
    decimals: int
    percent: bool
    start: int = 0
    end: int = 0


def _read(text: str, *, prose: bool) -> list[Number]:
    found = []
    for m in _TOKEN.finditer(text):
        start, end = m.span()
        before = text[start - 1] if start else " "
        before2 = text[start - 2] if start > 1 else " "
        if before.isalnum() or before in "._/\\#@":
            continue
        if before in "-–" and re.search(r"[A-Za-z_][\w.]*$", text[max(0, start - 40):start - 1]):
            continue  # Qwen3-0.6B, exp2-k8
        if before == "," and before2.isdigit():
            continue
        after = text[end:end + 4]
        if after[:1] == "." and after[1:2].isdigit():
            continue  # a dotted version the masks missed
        word = after[:1].isalpha() or after[:1] == "_"
        if word and not (prose and _UNIT.match(after)) and not (not prose and after[:1] in "esx"):
            continue  # a word (2nd, bf16) or, printed, an identifier
        percent = bool(re.match(r"\s?%", after))
        raw = m.group(0)
        digits = re.sub(r"[,\u202f\u2009 ]", "", raw)
        mantissa = re.split(r"[eE]", digits)[0]
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        if "e" in digits.lower():
            decimals = -1  # scientific: compared by value only
        found.append(Number(raw + ("%" if percent else ""), abs(float(digits)), decimals, percent,
                            start, end + (len(re.match(r"\s?%", after).group(0)) if percent else 0)))
    return found


def claims(markdown: str) -> list[Number]:
    """The numbers ``markdown`` states as claims (offsets into ``markdown``)."""
    return _read(mask(markdown), prose=True)


def printed_numbers(output: str) -> list[Number]:
    """The numbers a cell's output (or a recorded file) shows."""
    return _read(output, prose=False)


def _rounds_to(value: float, target: float, decimals: int) -> bool:
    return abs(value - target) <= 0.5 * 10.0 ** -decimals + 1e-9


def matches(claim: Number, shown: Number) -> bool:
    """Whether ``shown`` (printed) states ``claim`` (prose), by the module's rounding rule."""
    if claim.decimals < 0 or shown.decimals < 0:
        return abs(claim.value - shown.value) <= 1e-9 * max(1.0, claim.value)
    if claim.percent:
        if shown.percent:
            return shown.decimals >= claim.decimals and _rounds_to(shown.value, claim.value,
                                                                   claim.decimals)
        return (shown.value <= 1 and shown.decimals >= claim.decimals + 2
                and _rounds_to(shown.value * 100, claim.value, claim.decimals))
    if shown.percent:
        return False
    return shown.decimals >= claim.decimals and abs(shown.value - claim.value) <= 1e-9 * max(
        1.0, claim.value)


def is_shown(claim: Number, shown: list[Number]) -> bool:
    return any(matches(claim, s) for s in shown)


# ---------------------------------------------------------------------------------------------
# Documents and their sections


@dataclass
class Section:
    """The prose of one section and what its cells print."""

    heading: str
    # (where: "cell N" or "", markdown, its offset in the cell's source or the file)
    prose: list[tuple[str, str, int]] = field(default_factory=list)
    printed: str = ""
    code: str = ""


@dataclass(frozen=True)
class Problem:
    """A number no rule accepts, or a quoted entry that matches nothing."""

    document: str
    section: str
    where: str
    number: str
    context: str
    start: int = -1  # the number's offset in the cell's source (notebooks) or the file

    def __str__(self) -> str:
        return f"{self.document} [{self.section}] {self.where}: {self.number!r} in ...{self.context}..."


_HEADING = re.compile(r"^ {0,3}(#{1,2}) (.*)$")


def _split(markdown: str) -> list[tuple[str | None, str]]:
    """``markdown`` cut at its level 1-2 headings: (heading or None for the text before the
    first, text), outside fenced code blocks."""
    parts: list[tuple[str | None, str]] = [(None, "")]
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line.rstrip("\n"))
        if heading:
            parts.append((heading.group(2).strip(), line))
        else:
            parts[-1] = (parts[-1][0], parts[-1][1] + line)
    return [p for p in parts if p[0] is not None or p[1]]


def _output_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        text = output.get("text", "")
        parts.append(text if isinstance(text, str) else "".join(text))
        for kind, value in output.get("data", {}).items():
            if kind.startswith("text/"):
                parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def notebook_sections(notebook: nbformat.NotebookNode) -> list[Section]:
    """A notebook's sections: each markdown cell's text (cut at its headings) and each code
    cell's output go to the section they are in."""
    sections = [Section("(before the first heading)")]
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            offset = 0
            for heading, text in _split(cell.source):
                if heading is not None:
                    sections.append(Section(heading))
                sections[-1].prose.append((f"cell {index}", text, offset))
                offset += len(text)
        elif cell.cell_type == "code":
            sections[-1].printed += "\n" + _output_text(cell)
            sections[-1].code += "\n" + cell.source
    return sections


def markdown_sections(markdown: str) -> list[Section]:
    sections = [Section("(before the first heading)")]
    offset = 0
    for heading, text in _split(markdown):
        if heading is not None:
            sections.append(Section(heading))
        sections[-1].prose.append(("", text, offset))
        offset += len(text)
    return sections


_CHECK = re.compile(r"\bcheck\(\s*[\"']([\w.]+)[\"']")


def without_comments(code: str) -> str:
    """``code`` without its ``#`` comments: a number in a comment ("notebook 10 alone ...") is
    no value the code sets. Code that does not tokenize is kept whole."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code
    lines = code.splitlines(keepends=True)
    for token in reversed([t for t in tokens if t.type == tokenize.COMMENT]):
        row, column = token.start
        line = lines[row - 1]
        lines[row - 1] = line[:column] + line[column + len(token.string):]
    return "".join(lines)


def exercise_text(code: str) -> str:
    """For the ``check("NN.name", ...)`` calls in ``code``: each exercise's question, its
    judge's source and the values of the module constants the judge reads (its fixed inputs)."""
    ids = _CHECK.findall(code)
    if not ids:
        return ""
    import inspect

    from grpo_core import exercises

    parts = []
    for name in ids:
        exercise = exercises.EXERCISES.get(name)
        if exercise is None:
            continue
        parts += [exercise.question, inspect.getsource(exercise.judge)]
        for used in exercise.judge.__code__.co_names:
            value = vars(exercises).get(used)
            if value is not None and not callable(value) and not inspect.ismodule(value):
                parts.append(repr(value.tolist() if hasattr(value, "tolist") else value))
            elif inspect.isfunction(value) and value.__module__ == exercises.__name__:
                parts.append(inspect.getsource(value))
    return "\n".join(parts)


def start_page_output(notebook_dir: Path | None = None) -> str:
    """The text ``tools/notebooks.py start`` writes from the recorded ``build_info.json``."""
    from tools import notebooks

    notebook_dir = notebook_dir or notebooks.NOTEBOOK_DIR
    page = notebooks.start_page(notebooks.paired_scripts(notebook_dir),
                                notebooks.read_build_info(notebook_dir))
    return "\n".join(cell.source for cell in page.cells)


# ---------------------------------------------------------------------------------------------
# Quoted numbers and their sources


@dataclass(frozen=True)
class Quote:
    """A number in the prose that no cell prints, with where it comes from.

    ``excerpt`` is the prose around the number, as written (spaces and line breaks aside);
    ``kind`` is one of ``setting``, ``file``, ``link``, ``lecture`` or ``example`` and ``source``
    says what: an importable attribute path (``grpo_core.profiles.PROFILES['cpu'].group_size``
    style: ``module.attr.attr`` with optional ``[key]``), a repository path, a URL, a lecture
    excerpt holding the number, or the reason for an example.
    """

    number: str
    excerpt: str
    kind: str
    source: str

    def pattern(self) -> re.Pattern[str]:
        words = self.excerpt.split()
        return re.compile(r"\s+".join(map(re.escape, words)))

    def verify(self, paragraph: str, root: Path = ROOT) -> str | None:
        """Why the source does not hold the number, or None."""
        claim = claims(self.number)
        if len(claim) != 1:
            return f"{self.number!r} is not one number"
        if self.kind == "setting":
            try:
                value = resolve(self.source)
            except Exception as error:  # noqa: BLE001 - any failure is the message
                return f"cannot read {self.source}: {error!r}"
            values = value if isinstance(value, (list, tuple)) else [value]
            want = claim[0].value / 100 if claim[0].percent else claim[0].value
            ok = any(isinstance(v, (int, float)) and abs(abs(v) - want) < 1e-12 for v in values)
            return None if ok else f"{self.source} is {value!r}, not {self.number}"
        if self.kind == "file":
            path = root / self.source
            if not path.is_file():
                return f"no file {self.source}"
            return None if is_shown(claim[0], printed_numbers(path.read_text())) else (
                f"{self.source} does not contain {self.number}")
        if self.kind == "link":
            return None if self.source in paragraph else f"the paragraph does not link {self.source}"
        if self.kind == "lecture":
            if not is_shown(claim[0], printed_numbers(self.source)):
                return f"the lecture excerpt does not hold {self.number}"
            if LECTURE.exists():
                lecture = " ".join(LECTURE.read_text().split())
                if " ".join(self.source.split()) not in lecture:
                    return f"the lecture ({LECTURE}) does not say {self.source!r}"
            return None
        if self.kind == "example":
            return None if self.source.strip() else "an example needs its reason"
        return f"unknown kind {self.kind!r}"


def resolve(path: str):
    """The value at ``module.attr[.attr|[key]]...``, importing the longest module prefix."""
    parts = re.findall(r"[^.\[\]]+|\[[^\]]+\]", path)
    module, rest = None, []
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        if "[" in name:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        rest = parts[cut:]
        break
    if module is None:
        raise ImportError(path)
    value = module
    for part in rest:
        if part.startswith("["):
            key = part[1:-1].strip("'\"")
            value = value[int(key) if key.isdigit() else key]
        else:
            value = getattr(value, part)
    return value


# ---------------------------------------------------------------------------------------------
# Checking a document

_FILE_REF = re.compile(r"`([\w./-]+)`|\]\(([^)\s#]+)")


def _paragraphs(text: str) -> list[tuple[int, str]]:
    out, offset = [], 0
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip() and not re.fullmatch(r"\n\s*\n", block):
            out.append((offset, block))
        offset += len(block)
    return out


@functools.cache
def _untracked(root: Path) -> frozenset[Path]:
    """Files under ``root`` that git ignores (a local worktree, a venv, ``runs/``): not the
    repository, so no prose number may rest on them (a clean clone has none). Empty where git
    is missing."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--others", "--ignored",
                                 "--exclude-standard", "-z"], capture_output=True, text=True,
                                check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset((root / name).resolve() for name in listed.split("\0") if name)


def _named_files(paragraph: str, base: Path, root: Path) -> list[Path]:
    ignored = _untracked(root)
    files = []
    for m in _FILE_REF.finditer(paragraph):
        name = (m.group(1) or m.group(2) or "").rstrip("/.,")
        if not name or name.startswith(("http", "mailto")):
            continue
        for candidate in (base / name, root / name, root / "data" / "runs" / name):
            try:
                candidate = candidate.resolve()
            except OSError:
                continue
            if root not in candidate.parents and candidate != root:
                continue
            if candidate.is_file():
                if candidate not in ignored:
                    files.append(candidate)
                break
            if candidate.is_dir() and candidate != root:
                files += [p for p in sorted(candidate.rglob("*")) if p.is_file()
                          and p.suffix in {".json", ".jsonl", ".md", ".txt", ".py", ".csv", ".toml"}
                          and p not in ignored]
                break
    return files


def _text(path: Path, cache: dict[Path, list[Number]]) -> list[Number]:
    if path not in cache:
        try:
            cache[path] = printed_numbers(path.read_text())
        except (UnicodeDecodeError, OSError):
            cache[path] = []
    return cache[path]


@dataclass
class Report:
    """What a check found: problems, and how each accepted number was accepted."""

    problems: list[Problem] = field(default_factory=list)
    accepted: dict[str, list[tuple[str, str, Number]]] = field(default_factory=dict)
    count: int = 0

    def accept(self, how: str, section: str, where: str, number: Number) -> None:
        self.accepted.setdefault(how, []).append((section, where, number))


def check_sections(document: str, sections: list[Section], quotes: list[Quote] = (),
                   *, base: Path = ROOT, root: Path = ROOT,
                   declared: list[Path] = (), files: bool = True) -> Report:
    """Check every claim of ``sections`` (see the module's rules); ``files``: whether files a
    paragraph names (and ``declared``) are sources (the README files and docs, not notebooks)."""
    report = Report()
    used: set[int] = set()
    cache: dict[Path, list[Number]] = {}
    declared_numbers = [n for path in declared for n in _text(path, cache)]
    for section in sections:
        shown = printed_numbers(section.printed)
        stated = printed_numbers(re.sub(r"(?<=\d)_(?=\d)", "", without_comments(section.code)))
        exercise = printed_numbers(exercise_text(section.code))
        for where, markdown, offset in section.prose:
            masked = mask(markdown)
            for p_start, paragraph in _paragraphs(markdown):
                named = _named_files(paragraph, base, root) if files else []
                for number in _read(masked[p_start:p_start + len(paragraph)], prose=True):
                    report.count += 1
                    start, end = p_start + number.start, p_start + number.end
                    located = Number(number.text, number.value, number.decimals, number.percent,
                                     offset + start, offset + end)
                    if is_shown(number, shown):
                        report.accept("printed", section.heading, where, located)
                        continue
                    if is_shown(number, stated):
                        report.accept("code", section.heading, where, located)
                        continue
                    if is_shown(number, exercise):
                        report.accept("exercise", section.heading, where, located)
                        continue
                    if any(is_shown(number, _text(f, cache)) for f in named) or is_shown(
                            number, declared_numbers):
                        report.accept("recorded", section.heading, where, located)
                        continue
                    quote = _quote_for(quotes, number, markdown, start, end)
                    if quote is not None:
                        used.add(quote)
                        why = quotes[quote].verify(paragraph, root)
                        if why is None:
                            report.accept("quoted", section.heading, where, located)
                            continue
                        context = f"quoted source fails: {why}"
                    else:
                        context = " ".join(markdown[max(0, start - 50):end + 30].split())
                    report.problems.append(
                        Problem(document, section.heading, where, number.text, context,
                                offset + start))
    for index, quote in enumerate(quotes):
        if index not in used:
            report.problems.append(Problem(
                document, "QUOTED", "", quote.number,
                f"stale quoted entry: the prose has no unprinted {quote.number!r} in "
                f"{quote.excerpt!r}"))
    return report


def _quote_for(quotes, number: Number, markdown: str, start: int, end: int) -> int | None:
    for index, quote in enumerate(quotes):
        want = claims(quote.number)
        if len(want) != 1 or not matches(number, want[0]) or not matches(want[0], number):
            continue
        for m in quote.pattern().finditer(markdown):
            if m.start() <= start and end <= m.end():
                return index
    return None


def check_notebook(path: Path, quotes: list[Quote] = ()) -> Report:
    notebook = nbformat.read(path, as_version=4)
    sections = notebook_sections(notebook)
    if path.name == "START_HERE.ipynb":
        for section in sections:
            section.printed += "\n" + start_page_output(path.parent)
    return check_sections(path.stem, sections, quotes, base=path.parent, files=False)


_DECLARED = re.compile(r"<!--\s*numbers:\s*(.*?)-->", re.S)


def check_markdown(path: Path, quotes: list[Quote] = (), root: Path = ROOT,
                   text: str | None = None) -> Report:
    """Check a markdown file (``text``: its text, if not the file's own, e.g. an altered copy;
    the files it names are still looked up beside ``path``)."""
    markdown = path.read_text() if text is None else text
    document = str(path.relative_to(root))
    declared = [root / name for m in _DECLARED.finditer(markdown) for name in m.group(1).split()]
    report = check_sections(document, markdown_sections(markdown), quotes, base=path.parent,
                            root=root, declared=[p for p in declared if p.is_file()])
    report.problems += [Problem(document, "numbers", "", "", f"declared file {p} does not exist")
                        for p in declared if not p.is_file()]
    return report


def documents(root: Path = ROOT) -> list[Path]:
    """Every document the checker reads, notebooks first."""
    return [*sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")),
            root / "notebooks" / "START_HERE.ipynb", root / "README.md",
            root / "data" / "README.md", *sorted((root / "docs").glob("*.md"))]


def document_id(path: Path, root: Path = ROOT) -> str:
    return path.stem if path.suffix == ".ipynb" else str(path.relative_to(root))


def check(path: Path, quotes: list[Quote] = (), root: Path = ROOT) -> Report:
    return (check_notebook(path, quotes) if path.suffix == ".ipynb"
            else check_markdown(path, quotes, root))


def _main() -> None:  # pragma: no cover - a maintainer's listing
    import sys

    sys.path.insert(0, str(ROOT))
    from tests.test_prose_numbers import QUOTED

    for path in documents():
        report = check(path, QUOTED.get(document_id(path), []))
        print(f"== {document_id(path)}: {report.count} numbers, "
              + ", ".join(f"{k} {len(v)}" for k, v in report.accepted.items())
              + f", problems {len(report.problems)}")
        for problem in report.problems:
            print("   ", problem)


if __name__ == "__main__":  # pragma: no cover
    _main()

__all__ = ["Quote", "Report", "Problem", "check", "claims", "documents", "mask", "matches",
           "printed_numbers"]
