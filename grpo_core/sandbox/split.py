"""Split each assert into what the candidate computes and what the parent judges.

``assert set(similar(a, b)) == set((4, 5))`` becomes one *leaf*, ``similar(a, b)``, that the
sandboxed child evaluates and sends back as plain data, and a *judge*,
``__guard("set", set)(__V[0]) == set((4, 5))``, that the parent evaluates with its own trusted
Python on the decoded value. Neither the wrapper nor the expected value ever leaves the parent,
so no trick inside the child (rebinding ``set`` at run time, reading the caller's frame, an
always-equal object, a forged result record) can find or fake them (issue 32, class 1).

Which names are the candidate's? A name the candidate's code (or the setup code, which runs
in the child) binds at module level, statically: definitions, assignments, imports, also
inside a top-level ``if``/``try``/``for``. ``import math`` binds the real module and so does
not count as rebinding ``math``. A name that is neither the candidate's nor one the parent
resolves itself (a builtin, a trusted module such as ``math``, a name the setup imports from
one) fails the test for that candidate: it is never shipped. What the setup binds is sorted
by ``setup_bindings`` (issue 50, B): a plain literal is the parent's, a value built by a
candidate's call the candidate's, and the setup's own functions and values may only be
inputs of a candidate's call; a name the setup imports from a trusted module stays the
parent's when the candidate imports the same object (issue 50, E).

The child evaluates only *candidate calls*: a call whose callee is a candidate name, or an
attribute or subscript of one (``f(x)``, ``obj.method(x)``, ``fs[0](x)``), with its
arguments (the candidate's inputs: whatever the child computes there only feeds the
candidate's own function), and bare candidate references (``Box.v``). Everything around them
is the parent's: comparisons, ``and``/``or``/``not``, arithmetic (size-guarded), displays,
subscripts and attributes of the decoded values, and calls of ``PARENT_CALLS`` (builtins and
trusted-module functions) and ``SAFE_METHODS`` of plain values, all through
``judge.guarded_call``, which bounds their work. A test that needs anything else on the
candidate's values (``re.match(p, f(x))``, an f-string, ``f(x).replace(...)``) is failed for
every candidate (``SplitTest.refused``), not shipped.

A leaf must not compare anything itself: a test whose leaf would hold a comparison, a
comprehension or a lambda (``all(f(i) == i * i for i in range(5))``) cannot be split without
handing the expected values to the child, and is rejected with ``UnsplittableTestError``.
"""

from __future__ import annotations

import ast
import builtins
import functools
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from types import CodeType

# Modules whose names a test may use on the parent's side (sanitized MBPP imports math;
# MBPP task 596 calls sys.getsizeof on the expected side).
TRUSTED_MODULES = frozenset({"math", "cmath", "sys", "re", "string", "collections",
                             "itertools", "functools", "operator", "heapq"})
TRUSTED_NAMES = frozenset(dir(builtins)) | TRUSTED_MODULES
# Trusted functions the parent calls itself on the candidate's (decoded) values, by the name
# it resolves them to (a setup's ``from math import sqrt`` is ``math.sqrt``); every call goes
# through ``judge.guarded_call``, which bounds its work (issue 32, class 1: a wrapper the
# child evaluated carried trusted code, and the expected values in its arguments, into the
# child: ``round(add(2, 3) - 5, 6) == 0``). Anything else on the candidate's values fails
# the test: ``re`` could backtrack for ever on a chosen string, ``itertools`` and
# ``math.factorial`` grow without bound, ``map`` would run test code the guard cannot see.
PARENT_CALLS = frozenset({
    "abs", "all", "any", "bin", "bool", "chr", "complex", "dict", "divmod", "enumerate",
    "float", "frozenset", "hex", "int", "isinstance", "len", "list", "max", "min", "oct",
    "ord", "pow", "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type",
    "zip", "collections.Counter", "collections.OrderedDict",
    *(f"math.{name}" for name in (
        "isclose", "fabs", "sqrt", "floor", "ceil", "trunc", "exp", "log", "log2", "log10",
        "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "hypot", "degrees",
        "radians", "isfinite", "isinf", "isnan", "copysign", "fmod", "gcd", "isqrt", "fsum",
        "dist", "modf", "frexp", "ldexp")),
    *(f"cmath.{name}" for name in (
        "isclose", "phase", "polar", "rect", "sqrt", "exp", "log", "log10", "isfinite",
        "isinf", "isnan")),
})
# methods of plain values (str, bytes, list, tuple, dict, set...) the parent calls on the
# candidate's values: none makes more than its inputs (``join`` is bounded by the guard);
# ``replace``, ``center``, ``zfill``, ``format``... could, and are not here
SAFE_METHODS = frozenset({
    "count", "index", "find", "keys", "values", "items", "get", "copy", "lower", "upper",
    "strip", "lstrip", "rstrip", "split", "startswith", "endswith", "isdigit", "isalpha",
    "isalnum", "isupper", "islower", "isspace", "join"})
# calls whose (first) argument the parent only iterates: the child may send a generator,
# a map or a view as the list of its items
ITERATING_CALLS = frozenset({"len", "sorted", "list", "tuple", "min", "max", "sum", "any",
                             "all", "set", "frozenset", "dict", "enumerate", "zip",
                             "reversed", "collections.Counter", "collections.OrderedDict",
                             "math.fsum", ".join"})
# sub-expressions that would make the child judge (part of) the test itself
_JUDGING_NODES = (ast.Compare, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp,
                  ast.DictComp, ast.GeneratorExp)

VALUES_NAME = "__V"  # the judge reads leaf values from this list
GUARD_NAME = "__guard"  # the judge calls PARENT_CALLS through judge.guarded_call
METHOD_NAME = "__method"  # and SAFE_METHODS of plain values through judge.guarded_method
# The parent parses model-written code to find its names; that code's own warnings (invalid
# escape sequences...) are not the user's business. Parsed under this file name, they are
# filtered by name, which (unlike warnings.catch_warnings) is safe across threads.
CANDIDATE_FILENAME, TEST_FILENAME = "<candidate>", "<test>"
warnings.filterwarnings("ignore", module=f"^({CANDIDATE_FILENAME}|{TEST_FILENAME})$")
BINOP_NAME = "__binop"  # arithmetic on candidate values goes through a size guard
CALLS_NAME = "__calls"  # the test's own functions (key=) count their calls (issue 50, D)


# CPython 3.11 keeps the AST converter's recursion depth in state that threads share, so two
# threads parsing at once can get "SystemError: AST constructor recursion depth mismatch"
# (gh-106905); ``unit_test_reward`` scores completions from a thread pool. Parsing is fast.
_AST_LOCK = threading.Lock()


def parse(source: str, filename: str) -> ast.Module:
    """``ast.parse``, one thread at a time; a SystemError reads as a SyntaxError."""
    with _AST_LOCK:
        try:
            return ast.parse(source, filename=filename)
        except SystemError as error:
            raise SyntaxError(f"the parser failed: {error}") from None


class UnsplittableTestError(ValueError):
    """A test is not a single assert the sandbox can split (a dataset problem, raised early)."""


@dataclass(frozen=True)
class Leaf:
    """One expression the child evaluates. ``truth_context``: only its truth value matters.
    ``iterable``: the parent only iterates it (``sorted(f(x))``), so the child may send a
    generator, a map or a view as the list of its items."""

    source: str
    truth_context: bool
    iterable: bool = False


@dataclass(frozen=True)
class SplitTest:
    """One assert: its leaves and the judge that the parent evaluates on their values.

    ``judge`` is compiled ``eval`` code that reads ``__V[k]`` for the k-th leaf of this test.
    ``refused``: why this candidate fails the test without running it (it rebinds a name the
    judge needs, so splitting would hand the judge to the child), or empty.
    """

    source: str
    leaves: tuple[Leaf, ...]
    judge: CodeType
    refused: str = ""


_FAILED_JUDGE = compile("False", "<judge>", "eval", dont_inherit=True)


@dataclass(frozen=True)
class SplitPlan:
    """All tests of one completion; ``offsets[i]`` is where test i's leaves start in ``leaves``."""

    tests: tuple[SplitTest, ...]
    leaves: tuple[Leaf, ...]
    offsets: tuple[int, ...]
    imports: tuple[tuple[str, str], ...] = ()  # trusted names the setup imports, for the judge
    literals: tuple[tuple[str, str], ...] = ()  # plain values the setup binds, for the judge
    child_setup: str = ""  # the setup code the child runs: without the judge's own values


def plan_tests(code: str, setup_code: str, tests: Sequence[str]) -> SplitPlan:
    """Split every test for this candidate.

    Raises ``UnsplittableTestError`` only for a test that is bad whoever answers it (a
    dataset problem, found with no candidate names at all); a test that only this
    candidate's bindings make unsplittable, or whose trusted names it rebinds, is failed for
    this candidate (``SplitTest.refused``), never raised and never delegated to the child.
    """
    setup = setup_bindings(setup_code)
    imported = trusted_imports(setup_code) | frozenset(setup.literals)  # the parent's
    aliases = tuple(sorted(trusted_import_values(setup_code).items()))
    # the setup runs after the code, so its binding wins: a name it imports from a trusted
    # module stays the parent's when the code binds it only to that same object (issue 50, E)
    same = {name for name, dotted in trusted_import_values(setup_code).items()
            if candidate_import_values(code).get(name) == dotted}
    candidate_names = (module_level_names(code) - same) \
        | (module_level_names(setup_code) - imported)
    split_tests, leaves, offsets = [], [], []
    for test in tests:
        # the dataset's own check: may raise
        split_assert(test, frozenset(), imported, aliases, setup.owned)
        split = split_for_candidate(test, candidate_names, imported, aliases, setup.owned)
        offsets.append(len(leaves))
        leaves.extend(split.leaves)
        split_tests.append(split)
    literals = tuple(sorted(setup.literals.items()))
    return SplitPlan(tuple(split_tests), tuple(leaves), tuple(offsets), aliases, literals,
                     setup_for_child(setup_code, frozenset(setup.literals)
                                     - _names_in_leaves(tuple(leaves))))


def split_for_candidate(test: str, candidate_names: frozenset[str],
                        imported: frozenset[str] = frozenset(),
                        aliases: tuple[tuple[str, str], ...] = (),
                        setup_owned: frozenset[str] = frozenset()) -> SplitTest:
    """``split_assert`` for one candidate, or a refused test (see ``plan_tests``)."""
    relevant = candidate_names & names_in_test(test)
    reason = rebinding_problem(test, relevant, imported) \
        or unknown_names_problem(test, candidate_names, imported)
    if not reason:
        try:
            return split_assert(test, relevant, imported, aliases, setup_owned)
        except UnsplittableTestError as error:
            reason = f"its bindings make the test unsplittable ({error})"
    return SplitTest(test, (), _FAILED_JUDGE, reason)


def unknown_names_problem(test: str, candidate_names: frozenset[str],
                          imported: frozenset[str] = frozenset()) -> str:
    """Why the test fails for a candidate that does not bind a name it reads, or ``""``.

    A name the parent cannot resolve (not a builtin, a trusted module or a name the setup
    imports from one) and the candidate's code does not bind is not shipped to the child to
    be looked up there (issue 32, class 1: the child would have evaluated whatever expression
    held it, trusted code and expected values included): the candidate fails that test.
    """
    unknown = free_names_in_test(test) - candidate_names - TRUSTED_NAMES - imported
    if not unknown:
        return ""
    return f"it reads {', '.join(sorted(unknown))}, which neither the parent nor the " \
           f"candidate binds"


def rebinding_problem(test: str, relevant: frozenset[str],
                      imported: frozenset[str] = frozenset()) -> str:
    """Why the candidate may not take part in ``test``, or ``""``.

    ``relevant``: the candidate's names that the test reads. A trusted name among them (a
    builtin such as ``abs`` or ``set``, a module such as ``math``, a name the setup code
    imports from one) would move part of the judge, expected values included, into the
    child. Only the entry point may be such a name (MBPP has functions called ``sum``): it
    is recognised as a trusted name the test *calls*, innermost, when the test calls no
    untrusted candidate function at all.
    """
    trusted = TRUSTED_NAMES | imported
    rebound = relevant & trusted
    if not rebound:
        return ""
    called = _called_names(_parse_assert(test))
    if called & (relevant - trusted):
        allowed: set[str] = set()  # the entry point is an ordinary name: no trusted one is
    else:
        allowed = {name for name in rebound & called
                   if not _wraps_one_of(_parse_assert(test), name, rebound - {name})}
    refused = sorted(rebound - allowed)
    return f"it rebinds {', '.join(refused)}, which the test reads" if refused else ""


def _called_names(node: ast.AST) -> set[str]:
    """Names called directly (``name(...)``) anywhere in ``node``."""
    return {child.func.id for child in ast.walk(node)
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name)}


def _wraps_one_of(node: ast.AST, name: str, others: set[str]) -> bool:
    """Does some call ``name(...)`` have a call of one of ``others`` in its arguments?"""
    for child in ast.walk(node):
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) \
                and child.func.id == name:
            inner = [*child.args, *(keyword.value for keyword in child.keywords)]
            if any(_called_names(arg) & others for arg in inner):
                return True
    return False


@functools.lru_cache(maxsize=4096)
def trusted_imports(setup_code: str) -> frozenset[str]:
    """Names the setup code binds by importing from a trusted module (``import math``,
    ``from collections import Counter``): the parent resolves them itself, so they stay
    on the judge's side (the candidate runs first and could patch what setup imports)."""
    return frozenset(trusted_import_values(setup_code))


@functools.lru_cache(maxsize=4096)
def trusted_import_values(setup_code: str) -> dict[str, str]:
    """``name -> "module"`` or ``"module.attribute"`` for ``trusted_imports``."""
    try:
        tree = parse(setup_code, CANDIDATE_FILENAME)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in TRUSTED_MODULES:
                    found[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in TRUSTED_MODULES \
                and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                else:  # the parent lists what a star import binds, from its own module
                    found.update((name, f"{node.module}.{name}")
                                 for name in star_names(node.module))
    return found


@dataclass(frozen=True)
class SetupBindings:
    """What the setup code binds, by who may judge with it (issue 50, B).

    ``literals``: ``name -> source`` of a plain value the setup binds once and never touches
    again (``expected = [1, 2]``): the parent evaluates it itself (``ast.literal_eval``).
    ``owned``: the setup's own functions, classes, untrusted imports and computed values:
    a leaf may take them as inputs (``f(root)``) but never call or read them, since the
    candidate's process could patch them. A value the setup builds by calling a name it does
    not bind itself (``s = Solution()``, ``root = Node(1)``) is the candidate's object, in
    neither set.
    """

    literals: dict[str, str]
    owned: frozenset[str]


@functools.lru_cache(maxsize=4096)
def setup_bindings(setup_code: str) -> SetupBindings:
    """Sort the names ``setup_code`` binds (see ``SetupBindings``)."""
    try:
        tree = parse(setup_code, CANDIDATE_FILENAME)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return SetupBindings({}, frozenset())
    bound = module_level_names(setup_code)
    mentions: dict[str, int] = {}  # every Name node and global declaration, anywhere
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            mentions[node.id] = mentions.get(node.id, 0) + 1
            if not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.Global):
            for name in node.names:
                mentions[name] = stores[name] = 99  # a function may rebind it: not plain
    literals, built = {}, set()
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if mentions.get(name) == 1 and _is_literal(node.value):
            literals[name] = ast.unparse(node.value)
        elif stores.get(name) == 1 and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) \
                and node.value.func.id not in bound | TRUSTED_NAMES:
            built.add(name)
    owned = bound - trusted_imports(setup_code) - frozenset(literals) - frozenset(built)
    return SetupBindings(literals, owned)


def _is_literal(node: ast.expr) -> bool:
    """Is ``node`` a plain literal (numbers, strings, containers of them), small enough to
    evaluate in the parent?"""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False
    return True


@functools.lru_cache(maxsize=4096)
def candidate_import_values(code: str) -> dict[str, str]:
    """``name -> "module.attribute"`` (or ``"module"``) for each name the code binds, at
    module level, only by importing it from a trusted module (issue 50, E: ``from
    collections import Counter`` in the code and in the setup is the same object, which
    the parent resolves itself). A name the code also binds any other way, or declares
    ``global`` in a function (which may rebind it after the setup ran), is left out."""
    names = module_level_names(code)
    if not names:
        return {}
    found: dict[str, str] = {}
    other: set[str] = set()
    tree = parse(code, CANDIDATE_FILENAME)
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ImportFrom) and node.module in TRUSTED_MODULES \
                and not node.level and all(alias.name != "*" for alias in node.names):
            for alias in node.names:
                name, dotted = alias.asname or alias.name, f"{node.module}.{alias.name}"
                other.update([name] if found.setdefault(name, dotted) != dotted else [])
            continue
        other |= _names_bound_by(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        pending.extend(ast.iter_child_nodes(node))
    other |= {name for node in ast.walk(tree) if isinstance(node, ast.Global)
              for name in node.names}
    return {name: dotted for name, dotted in found.items() if name not in other}


def setup_for_child(setup_code: str, parent_only: frozenset[str]) -> str:
    """The setup code without the statements that bind ``parent_only`` plain values: the
    judge's expected values, which no leaf needs, never enter the child (the candidate
    could read them from its request)."""
    if not parent_only:
        return setup_code
    tree = parse(setup_code, CANDIDATE_FILENAME)
    tree.body = [node for node in tree.body
                 if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                         and isinstance(node.targets[0], ast.Name)
                         and node.targets[0].id in parent_only)]
    return ast.unparse(tree) + "\n"


def _names_in_leaves(leaves: tuple[Leaf, ...]) -> frozenset[str]:
    """Every name the leaves' sources mention (a setup value they take as input)."""
    names: set[str] = set()
    for leaf in leaves:
        names |= {node.id for node in ast.walk(parse(leaf.source, TEST_FILENAME))
                  if isinstance(node, ast.Name)}
    return frozenset(names)


@functools.cache
def star_names(module_name: str) -> tuple[str, ...]:
    """What ``from <trusted module> import *`` binds: its ``__all__``, else its public names
    (issue 32, class 1: names the parent could not list were shipped to the child)."""
    import importlib
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name in dir(module) if not name.startswith("_")]
    return tuple(sorted(name for name in names if isinstance(name, str)))


@functools.lru_cache(maxsize=8192)
def names_in_test(test: str) -> frozenset[str]:
    """Every name a test mentions (raises ``UnsplittableTestError`` if it is not one assert)."""
    return frozenset(node.id for node in ast.walk(_parse_assert(test))
                     if isinstance(node, ast.Name))


@functools.lru_cache(maxsize=8192)
def free_names_in_test(test: str) -> frozenset[str]:
    """The names a test reads that it does not bind itself (comprehension targets, lambda
    arguments)."""
    return names_in_test(test) - _locally_bound_names(_parse_assert(test))


@functools.lru_cache(maxsize=8192)
def split_assert(test: str, candidate_names: frozenset[str],
                 imported: frozenset[str] = frozenset(),
                 aliases: tuple[tuple[str, str], ...] = (),
                 setup_owned: frozenset[str] = frozenset()) -> SplitTest:
    """Split one assert. ``candidate_names``: names the candidate binds at module level;
    ``imported``: names the setup code imports from trusted modules (the parent's);
    ``aliases``: what each of those is (``isclose`` -> ``math.isclose``). A name that is
    none of these nor a builtin or trusted module counts as the candidate's here (the
    dataset's own check: whoever answers); ``split_for_candidate`` fails such a test first.
    ``setup_owned``: names the setup code binds to its own functions and values, which a
    leaf may take as inputs but never call or read (``setup_bindings``).

    A test that needs the parent to evaluate something it will not on the candidate's
    values comes back refused (``SplitTest.refused``); one that would make the child judge
    raises ``UnsplittableTestError``.
    """
    statement = _parse_assert(test)
    trusted = (TRUSTED_NAMES | imported) - candidate_names
    splitter = _Splitter(trusted, _locally_bound_names(statement), dict(aliases), setup_owned)
    try:
        body = splitter.visit(statement.test, truth_context=True)
    except _NotEvaluated as error:
        return SplitTest(test, (), _FAILED_JUDGE, str(error))
    expression = ast.fix_missing_locations(ast.Expression(body=body))
    with _AST_LOCK:
        judge = compile(expression, "<judge>", "eval", dont_inherit=True)
    return SplitTest(test, tuple(splitter.leaves), judge)


def _parse_assert(test: str) -> ast.Assert:
    try:
        module = parse(test.strip(), TEST_FILENAME)
    except SyntaxError as error:
        raise UnsplittableTestError(f"test is not valid Python: {test!r} ({error})") from None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Assert):
        raise UnsplittableTestError(f"a test must be exactly one assert statement: {test!r}")
    return module.body[0]


def _locally_bound_names(node: ast.AST) -> frozenset[str]:
    """Names bound inside the test itself (comprehension targets, lambda arguments)."""
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.comprehension):
            names |= {n.id for n in ast.walk(child.target) if isinstance(n, ast.Name)}
        elif isinstance(child, ast.Lambda):
            names |= {a.arg for a in ast.walk(child.args) if isinstance(a, ast.arg)}
    return frozenset(names)


class _NotEvaluated(Exception):
    """The test needs the parent to evaluate something it will not on the candidate's values."""


_LEAF_NODES = (ast.Attribute, ast.Subscript)  # steps from a candidate name to its part


class _Splitter:
    """Rewrites a test expression, collecting leaves in evaluation order.

    A sub-expression that reads no candidate name is the test's own: the parent evaluates it
    as written. Of the rest, only candidate calls and references become leaves; the parent
    evaluates everything around them on their decoded values, through the judge's guards.
    """

    def __init__(self, trusted: frozenset[str], local_names: frozenset[str],
                 aliases: dict[str, str] | None = None,
                 setup_owned: frozenset[str] = frozenset(),
                 tainted: frozenset[str] = frozenset()):
        self.trusted = trusted
        self.local_names = local_names
        self.aliases = aliases or {}
        self.setup_owned = setup_owned
        # the parameters of a test's own lambda that the parent calls on the candidate's
        # values: the parent's names, holding candidate values (issue 50, D)
        self.tainted = tainted
        self.leaves: list[Leaf] = []

    def is_candidate_name(self, name: str) -> bool:
        """Only the candidate's process can resolve it (a local of the test is the test's)."""
        return name not in self.local_names and name not in self.trusted

    def is_candidates(self, node: ast.AST) -> bool:
        """Does ``node`` mention a name only the candidate's process can resolve, or a
        parameter of a guarded lambda (a candidate's value in the parent)?"""
        return any(isinstance(child, ast.Name) and (self.is_candidate_name(child.id)
                                                    or child.id in self.tainted)
                   for child in ast.walk(node))

    def is_candidate_part(self, node: ast.expr) -> bool:
        """A candidate call (``f(x)``, ``obj.m(x)``, ``fs[0](x)``: its callee a candidate name
        or an attribute or subscript of one) or reference (``Box.v``): the child's."""
        target = node.func if isinstance(node, ast.Call) else node
        while isinstance(target, _LEAF_NODES):
            target = target.value
        return isinstance(target, ast.Name) and self.is_candidate_name(target.id)

    def visit(self, node: ast.expr, truth_context: bool = False,
              iterable: bool = False) -> ast.expr:
        """``node`` with each of the candidate's parts replaced by ``__V[k]``."""
        if not self.is_candidates(node):
            return node  # trusted test code: the parent evaluates it as written
        if self.is_candidate_part(node):
            return self._make_leaf(node, truth_context, iterable)
        if isinstance(node, ast.Name):
            return node  # a guarded lambda's parameter: the parent's value, guarded where used
        if isinstance(node, ast.Call):
            return self._visit_call(node)
        if isinstance(node, ast.Compare):
            self._check_identity(node)
            node.left = self.visit(node.left)
            node.comparators = [self.visit(item) for item in node.comparators]
        elif isinstance(node, ast.BoolOp):
            node.values = [self.visit(item, truth_context) for item in node.values]
        elif isinstance(node, ast.UnaryOp):
            node.operand = self.visit(node.operand, isinstance(node.op, ast.Not))
        elif isinstance(node, ast.BinOp):
            operands = [self.visit(node.left), self.visit(node.right)]
            name = ast.Constant(type(node.op).__name__)
            return ast.Call(ast.Name(BINOP_NAME, ast.Load()), [name, *operands], [])
        elif isinstance(node, ast.IfExp):
            node.test = self.visit(node.test, truth_context=True)
            node.body, node.orelse = (self.visit(node.body, truth_context),
                                      self.visit(node.orelse, truth_context))
        elif isinstance(node, (ast.Tuple, ast.List)):
            node.elts = [self._visit_item(item) for item in node.elts]
        elif isinstance(node, ast.Set) and not any(isinstance(item, ast.Starred)
                                                   for item in node.elts):
            node.elts = [self.visit(item) for item in node.elts]  # a few: the test's size
        elif isinstance(node, ast.Dict) and None not in node.keys:
            pairs = [(self.visit(key), self.visit(value))
                     for key, value in zip(node.keys, node.values, strict=True)]
            node.keys, node.values = [key for key, _ in pairs], [value for _, value in pairs]
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            node.value = self.visit(node.value)
            if isinstance(node, ast.Subscript):
                node.slice = self.visit(node.slice)
        elif isinstance(node, ast.Slice):
            for part in ("lower", "upper", "step"):
                if getattr(node, part) is not None:
                    setattr(node, part, self.visit(getattr(node, part)))
        elif isinstance(node, _JUDGING_NODES):
            if self.tainted:  # inside a guarded lambda: the parent's, but not evaluated
                raise _NotEvaluated(f"the parent does not evaluate a {type(node).__name__} "
                                    f"in a lambda on the candidate's values")
            raise _judging_error(node, node)
        else:
            raise _NotEvaluated(f"the parent does not evaluate a {type(node).__name__} on "
                                f"the candidate's values: {ast.unparse(node)!r}")
        return node

    def _visit_item(self, node: ast.expr, iterable: bool = False,
                    truth_context: bool = False) -> ast.expr:
        """An element or argument; a starred one is only iterated by the parent."""
        if isinstance(node, ast.Starred):
            node.value = self.visit(node.value, iterable=True)
            return node
        return self.visit(node, truth_context, iterable)

    def _visit_call(self, node: ast.Call) -> ast.expr:
        """A call the parent makes on the candidate's values: a ``PARENT_CALLS`` function,
        ``__guard(name, function)(...)``, or a ``SAFE_METHODS`` method of a plain value,
        ``__method(value, name)(...)``; anything else is refused."""
        name = self._trusted_callee(node.func)
        if name is not None:
            if name not in PARENT_CALLS:
                raise _NotEvaluated(f"the parent does not call {name} on the candidate's "
                                    f"values")
            guard = ast.Call(ast.Name(GUARD_NAME, ast.Load()),
                             [ast.Constant(name), node.func], [])
        elif isinstance(node.func, ast.Attribute) and node.func.attr in SAFE_METHODS:
            name = "." + node.func.attr
            guard = ast.Call(ast.Name(METHOD_NAME, ast.Load()),
                             [self.visit(node.func.value), ast.Constant(node.func.attr)], [])
        else:
            raise _NotEvaluated(f"the parent does not call {ast.unparse(node.func)!r} on "
                                f"the candidate's values")
        # bool(f(x)) needs only the truth of the candidate's value (it may not be plain data)
        node.args = [self._visit_item(item, iterable=name in ITERATING_CALLS
                                      and (k == 0 or name == "zip"), truth_context=name == "bool")
                     for k, item in enumerate(node.args)]
        for keyword in node.keywords:
            if keyword.arg is None and not self.is_candidates(keyword.value):
                # the test's own mapping could hold a key function the guard would not see
                raise _NotEvaluated("the parent does not unpack the test's own mapping into "
                                    "a call on the candidate's values")
            keyword.value = self._visit_function(keyword.value) if keyword.arg == "key" \
                else self.visit(keyword.value)
        node.func = guard
        return node

    def _check_identity(self, node: ast.Compare) -> None:
        """Refuse ``is``/``is not`` between two of the candidate's values (issue 50, C): each
        leaf is decoded into new objects, so ``f() is f()`` would always be false and
        ``f() is not f()`` always true, whatever the candidate returned. Against the test's
        own objects (``f(x) is None``, ``type(f(x)) is int``) identity is still the parent's."""
        operands = [node.left, *node.comparators]
        for k, op in enumerate(node.ops):
            if isinstance(op, (ast.Is, ast.IsNot)) and self.is_candidates(operands[k]) \
                    and self.is_candidates(operands[k + 1]):
                raise _NotEvaluated(f"identity is lost when values are decoded: "
                                    f"{ast.unparse(node)!r}")

    def _visit_function(self, node: ast.expr) -> ast.expr:
        """A key function the parent's call applies to the candidate's values (issue 50, D):
        a lambda of the test's own, its body guarded like the rest of the test, or a
        ``PARENT_CALLS`` function through its guard; either counted against the test's
        budget of calls (``judge.count_calls``). Anything else is refused."""
        if isinstance(node, ast.Constant) and node.value is None:
            return node
        if isinstance(node, ast.Lambda) and not self.is_candidates(node):
            function: ast.expr = self._guard_lambda(node)
        else:
            name = self._trusted_callee(node)
            if name is None and self.is_candidates(node):
                return self.visit(node)  # the candidate's function: a leaf (not plain data)
            if name not in PARENT_CALLS:
                raise _NotEvaluated(f"the parent does not call {ast.unparse(node)!r} on the "
                                    f"candidate's values")
            function = ast.Call(ast.Name(GUARD_NAME, ast.Load()), [ast.Constant(name), node],
                                [])
        return ast.Call(ast.Name(CALLS_NAME, ast.Load()), [function], [])

    def _guard_lambda(self, node: ast.Lambda) -> ast.Lambda:
        """``node`` with its body rewritten as the judge is: its parameters are the
        candidate's values, so arithmetic, calls and methods on them go through the guards
        and whatever the parent does not evaluate is refused."""
        arguments = node.args
        arguments.defaults = [self.visit(item) for item in arguments.defaults]
        arguments.kw_defaults = [None if item is None else self.visit(item)
                                 for item in arguments.kw_defaults]
        parameters = frozenset(item.arg for item in ast.walk(arguments)
                               if isinstance(item, ast.arg))
        inner = _Splitter(self.trusted, self.local_names, self.aliases, self.setup_owned,
                          self.tainted | parameters)
        node.body = inner.visit(node.body)
        return node

    def _trusted_callee(self, func: ast.expr) -> str | None:
        """The trusted function a callee names, as the parent resolves it (a setup import
        ``isclose`` is ``math.isclose``, ``m.sqrt`` under ``import math as m`` is
        ``math.sqrt``), or None if it is no plain (dotted) trusted name."""
        name = _dotted_name(func)
        if name is None or self.is_candidates(func):
            return None
        root, dot, rest = name.partition(".")
        if root in self.aliases:
            name = self.aliases[root] + dot + rest
        return name

    def _make_leaf(self, node: ast.expr, truth_context: bool,
                   iterable: bool = False) -> ast.expr:
        for child in ast.walk(node):
            if isinstance(child, _JUDGING_NODES):
                raise _judging_error(child, node)
        root = node.func if isinstance(node, ast.Call) else node
        while isinstance(root, _LEAF_NODES):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.setup_owned:
            # the setup's own function or value, called or read in the candidate's process
            # (issue 50, B): the candidate could patch it there; as an argument it is an input
            raise UnsplittableTestError(
                f"the test calls or reads {root.id}, which the setup code defines, outside "
                f"the arguments of a candidate's call: the candidate's process would judge "
                f"it: {ast.unparse(node)!r}")
        index = len(self.leaves)
        self.leaves.append(Leaf(ast.unparse(node), truth_context, iterable))
        return ast.Subscript(ast.Name(VALUES_NAME, ast.Load()), ast.Constant(index), ast.Load())


def _judging_error(child: ast.AST, node: ast.expr) -> UnsplittableTestError:
    """A candidate's part that would hold a comparison, a comprehension or a lambda."""
    return UnsplittableTestError(
        f"the candidate's part of this test would contain a {type(child).__name__}, so the "
        f"child would judge it: {ast.unparse(node)!r}")


def _dotted_name(node: ast.expr) -> str | None:
    """``math.isclose`` for ``Attribute(Name('math'), 'isclose')``, ``abs`` for a Name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


@functools.lru_cache(maxsize=4096)
def module_level_names(source: str) -> frozenset[str]:
    """Names a piece of code binds in its module namespace (statically; empty if it won't parse).

    Counts definitions, assignments, loop/with/except targets, walruses, ``global``
    declarations and imports, except ``import m`` of a trusted module ``m``, which binds the
    real module. Names bound dynamically (``globals()[...] = ...``) are not seen: the parent then
    evaluates that name with its own trusted meaning, which can only fail such a test.
    """
    try:
        tree = parse(source, CANDIDATE_FILENAME)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    names: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        names |= _names_bound_by(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # their bodies are other scopes
        pending.extend(child for child in ast.iter_child_nodes(node)
                       if not isinstance(child, ast.comprehension))
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            pending.extend(c.iter for c in node.generators)  # a walrus there binds globally
    names |= {name for node in ast.walk(tree) if isinstance(node, ast.Global)
              for name in node.names}
    return frozenset(names)


def _names_bound_by(node: ast.AST) -> set[str]:
    """The module-level names one AST node binds by itself."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return {node.id}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, ast.Import):
        return {alias.asname or alias.name.split(".")[0] for alias in node.names
                if alias.asname or alias.name not in TRUSTED_MODULES}
    if isinstance(node, ast.ImportFrom):
        return {alias.asname or alias.name for alias in node.names if alias.name != "*"}
    captured = getattr(node, "name", None) if type(node).__name__ in ("MatchAs", "MatchStar") \
        else getattr(node, "rest", None) if type(node).__name__ == "MatchMapping" else None
    return {captured} if isinstance(captured, str) else set()
