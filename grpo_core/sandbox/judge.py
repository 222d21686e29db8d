"""The parent's side of the protocol: read the child's records, decode values, judge tests.

Nothing here trusts the child. A record is a *claim* about what a leaf returned; a claim is
decoded only into builtin plain data (``json`` plus a depth-limited walk, never ``pickle``,
``marshal`` or ``eval``) and then compared with the parent's own expected values by the
parent's own Python. Exit codes, output and exceptions are never read as a pass: a test whose
leaves did not all arrive as valid records fails.
"""

from __future__ import annotations

import ast
import builtins
import cmath
import collections
import contextlib
import functools
import gc
import heapq
import itertools
import json
import math
import operator
import re
import string
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .split import (
    BINOP_NAME,
    CALLS_NAME,
    GUARD_NAME,
    METHOD_NAME,
    VALUES_NAME,
    SplitPlan,
)

MAX_DEPTH = 60  # the child refuses to encode deeper than 50
# The parent's work per completion is bounded by what decoding costs, not by bytes (issue 32,
# class 2: a 2.9 MB record of a million empty lists cost 1.6-2.4 s of the trainer's CPU).
# The largest honest values of MBPP's 974 references and the course's problems hold at most
# 644 JSON containers and about 1000 values per completion (all their records: 7 KB); but an
# honest test may compare a list of a few hundred thousand items (issue 50, A: 100 000
# values failed ``squares(250000) == [i * i for i in range(250000)]``, 2.8 MB of records).
# A million values is what the 4 MiB of records can hold (two bytes each) and costs the
# parent about 0.35-0.4 s of CPU to decode.
MAX_ITEMS = 1_000_000  # values decoded per completion (a container and each item: one each,
# text one more per 16 bytes and an integer one more per 64 bits, as ``weigh`` counts them)
MAX_CONTAINERS = 10_000  # JSON arrays and objects (each tag: a float is one) per completion
DECODE_LIMIT = 1_000_000  # values for a direct call of decode_value (trusted callers)
INT_DIGITS_PER_VALUE = 100_000  # a 4300-digit integer costs as much as 184 values
MAX_SAME_HASH = 32  # set/dict keys that may share one hash (more: a collision attack)
MAX_NAME_CHARS = 80
_MISSING = object()


@dataclass
class Records:
    """What the child claimed, parsed from its result pipe (first valid record per leaf wins)."""

    ready: bool = False  # the trusted bootstrap started (written before candidate code runs)
    loaded: bool = False
    load_error: str | None = None
    setup_error: str | None = None
    done: bool = False
    values: dict[int, Any] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    malformed: int = 0  # lines that were not valid records (a sign of tampering)


def parse_records(data: bytes, plan: SplitPlan) -> Records:
    """Parse the child's output. Never raises on malformed input; counts it instead.

    The work is bounded by what it costs, whatever the child wrote: only the first
    ``2 * leaves + 8`` lines are looked at (an honest child writes at most ``leaves + 4``);
    a line whose commas or brackets already show more values or containers than the
    completion's budget has left is refused before ``json`` parses it (counting bytes is
    cheap, building objects is not); at most ``MAX_ITEMS`` values and ``MAX_CONTAINERS``
    containers are decoded in all; no set or dict is built from keys that share a hash (see
    ``decode_value``); and the garbage collector is paused meanwhile (the values hold no
    cycles, and a collection would walk the whole trainer's heap).
    """
    records = Records()
    lines = data.split(b"\n", 2 * len(plan.leaves) + 8)[:2 * len(plan.leaves) + 8]
    if not lines or lines[0] != b"R":
        return records
    records.ready = True
    budget = _Budget(MAX_ITEMS, MAX_CONTAINERS)
    with _collector_paused():
        for line in lines[1:]:
            if line:
                _apply_record(records, line, plan, budget)
    return records


class _Budget:
    """How many more values, and containers, this completion's records may decode."""

    def __init__(self, items: int, containers: int | None = None):
        self.left = items
        self.containers = items if containers is None else containers

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise ValueError("too many values")

    def parse_int(self, digits: str) -> int:
        """``json``'s integer hook: ``int(str)`` costs time quadratic in the digits (up to
        Python's 4300), so a long integer is charged as that many values."""
        self.spend(len(digits) * len(digits) // INT_DIGITS_PER_VALUE)
        return int(digits)

    def spend_container(self) -> None:
        self.containers -= 1
        if self.containers < 0:
            raise ValueError("too many containers")

    def admits(self, line: bytes) -> bool:
        """Could ``line`` fit what is left? A record holds at least one value per comma
        past its own two, and one container (a JSON array or object) per bracket or brace
        past its own one; a line that already shows more is refused without parsing it."""
        return line.count(b",") - 2 <= self.left and \
            line.count(b"[") + line.count(b"{") - 1 <= self.containers


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while records are decoded (threads share it: the
    first one in pauses it, the last one out restores what it was)."""
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def _apply_record(records: Records, line: bytes, plan: SplitPlan, budget: _Budget) -> None:
    if line in (b"K", b"D"):
        records.loaded |= line == b"K"
        records.done |= line == b"D"
        return
    try:
        if not budget.admits(line):
            raise ValueError("more values than the budget has left")
        record = json.loads(line, parse_int=budget.parse_int)
        _apply_parsed(records, record, plan, budget)
    except (ValueError, TypeError, KeyError, IndexError, RecursionError, MemoryError,
            OverflowError):
        records.malformed += 1


def _apply_parsed(records: Records, record: Any, plan: SplitPlan, budget: _Budget) -> None:
    if type(record) is not list or not 2 <= len(record) <= 3:
        raise ValueError("not a record")
    if record[0] in ("L", "S") and len(record) == 2:
        message = _decode_name(record[1])
        if record[0] == "L" and records.load_error is None:
            records.load_error = message
        elif record[0] == "S" and records.setup_error is None:
            records.setup_error = message
        return
    index, kind, payload = record
    if type(index) is not int or not 0 <= index < len(plan.leaves):
        raise ValueError("unknown leaf")
    if index in records.values or index in records.errors:
        return  # first record per leaf wins; later ones are ignored
    if kind == "v":
        records.values[index] = decode_value(payload, budget=budget)
    elif kind == "b" and plan.leaves[index].truth_context and payload in (0, 1):
        records.values[index] = bool(payload)
    elif kind == "e":
        records.errors[index] = _decode_name(payload)
    else:
        raise ValueError("bad record kind")


def _decode_name(payload: Any) -> str:
    if type(payload) is not str or len(payload) > 400:
        raise ValueError("bad name")
    return safe_name(bytes.fromhex(payload).decode("utf-8", "replace"))


def safe_name(text: str) -> str:
    """An exception name as the child claimed it, safe to print: a dotted identifier stays as
    it is; anything else (terminal escapes, new lines, a fake "PASSED" line) is escaped."""
    if text.isascii() and all(part.isidentifier() for part in text.split(".")) \
            and len(text) <= MAX_NAME_CHARS:
        return text
    return ascii(text)[:MAX_NAME_CHARS]


def decode_value(payload: Any, depth: int = 0, budget: _Budget | None = None) -> Any:
    """Decode the child's tagged encoding into builtin plain data (raises ``ValueError``)."""
    budget = budget or _Budget(DECODE_LIMIT)
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    budget.spend(1)
    kind = type(payload)
    if kind is int:  # charged as ``weigh`` counts it, so that a guard takes what arrives
        budget.spend(payload.bit_length() >> 6)
    if payload is None or kind in (bool, int, float):
        return payload
    if kind is str:
        budget.spend(len(payload) >> 5)  # hex: two characters a byte, one value per 16 bytes
        return bytes.fromhex(payload).decode("utf-8", "surrogatepass")
    if kind is list:
        budget.spend_container()
        return [decode_value(item, depth + 1, budget) for item in payload]
    if kind is not dict or len(payload) != 1:
        raise ValueError("unknown value")
    budget.spend_container()
    (tag, body), = payload.items()
    return _decode_tagged(tag, body, depth + 1, budget)


def _decode_tagged(tag: str, body: Any, depth: int, budget: _Budget) -> Any:
    if tag in ("f", "c", "y", "a") and type(body) is not str:
        raise ValueError("bad scalar")
    if tag in ("y", "a"):
        budget.spend(len(body) >> 5)  # as text: one value per 16 bytes
    if tag == "f":
        return float(body)
    if tag == "c":
        return complex(body)
    if tag == "y":
        return bytes.fromhex(body)
    if tag == "a":
        return bytearray.fromhex(body)
    if type(body) is not list:
        raise ValueError("bad container")
    budget.spend_container()
    items = [decode_value(item, depth, budget) for item in body]
    if tag == "t":
        return tuple(items)
    if tag == "s":
        return set(_spread_keys(items))
    if tag == "z":
        return frozenset(_spread_keys(items))
    if tag == "d":
        if any(type(pair) is not list or len(pair) != 2 for pair in items):
            raise ValueError("bad dict")
        _spread_keys([pair[0] for pair in items])
        return dict(items)
    raise ValueError("unknown tag")


def _spread_keys(keys: list[Any]) -> list[Any]:
    """``keys``, after checking that no more than ``MAX_SAME_HASH`` of them share a hash.

    Integers, floats and tuples of them hash the same in every process, so a child can
    choose thousands of keys with one hash; building a set of them costs quadratic time,
    holding the GIL. Counting hashes first is linear (distinct hashes are distinct keys
    here), so such a value is refused before any set or dict is built.
    """
    counts: dict[int, int] = {}
    for key in keys:
        try:
            digest = hash(key)
        except TypeError:
            raise ValueError("unhashable key") from None
        count = counts.get(digest, 0) + 1
        if count > MAX_SAME_HASH:
            raise ValueError("too many keys with one hash")
        counts[digest] = count
    return keys


def judge_tests(plan: SplitPlan, records: Records) -> tuple[bool, ...]:
    """Pass/fail for each test: its judge, evaluated by the parent on the claimed values.

    A test passes only if the candidate loaded, every one of its leaves has a valid value
    record, and the judge is truthy. A judge that raises fails its test.
    """
    if not (records.ready and records.loaded) or records.load_error or records.setup_error:
        return tuple(False for _ in plan.tests)
    verdicts = []
    for split, offset in zip(plan.tests, plan.offsets, strict=True):
        values = [records.values.get(offset + k, _MISSING) for k in range(len(split.leaves))]
        verdicts.append(not split.refused and _MISSING not in values
                        and _evaluate_judge(split.judge, values, plan.imports, plan.literals))
    return tuple(verdicts)


def _evaluate_judge(judge: Any, values: list[Any],
                    imports: tuple[tuple[str, str], ...] = (),
                    literals: tuple[tuple[str, str], ...] = ()) -> bool:
    namespace = dict(_JUDGE_GLOBALS)
    namespace.update(_resolve_imports(imports))
    # the setup's plain values, the parent's own (issue 50, B); made afresh for each test
    namespace.update((name, ast.literal_eval(source)) for name, source in literals)
    namespace[VALUES_NAME] = values
    namespace[CALLS_NAME] = count_calls(_MAX_FUNCTION_CALLS)
    try:
        return bool(eval(judge, namespace))  # trusted test code over decoded plain data
    except Exception:
        return False


def _resolve_imports(imports: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The parent's own objects for the names the setup code imports from trusted modules."""
    found = {}
    for name, dotted in imports:
        module, _, attribute = dotted.partition(".")
        value = _JUDGE_GLOBALS.get(module)
        if value is not None and attribute:
            value = getattr(value, attribute, None)
        if value is not None:
            found[name] = value
    return found


_SEQUENCES = (str, bytes, bytearray, list, tuple)
_MAX_REPEAT = 1_000_000  # items a sequence * int may produce
_MAX_EXPONENT = 10_000  # for int ** int and int << int
_MAX_RESULT_BITS = 1 << 22  # an int power or shift may produce about 1.2 million digits


def guarded_binop(name: str, left: Any, right: Any) -> Any:
    """``left <op> right`` for one of ast's BinOp names, refusing results that would be huge.

    The candidate chooses ``left`` or ``right``: ``2 ** f(x)`` with ``f(x) = 10**9`` must not
    stall the trainer, so powers, shifts and repetitions are bounded before they run.
    """
    small_base = (0, 1, -1) if name == "Pow" else (0,)  # 1 ** n is cheap, 1 << n is not
    if name in ("Pow", "LShift") and isinstance(right, int) and abs(right) > _MAX_EXPONENT \
            and not (isinstance(left, (int, float)) and left in small_base):
        raise OverflowError("result too large to judge")
    if name == "Pow" and isinstance(left, int) and isinstance(right, int) \
            and left.bit_length() * abs(right) > _MAX_RESULT_BITS:
        raise OverflowError("result too large to judge")
    if name == "Mod" and isinstance(left, (str, bytes, bytearray)):
        # printf-style formatting of a candidate's string: a width such as %0999999999d
        # would build a gigabyte in the parent; no test needs to format the candidate's text
        raise OverflowError("the judge does not format strings")
    if name == "Mult":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCES) and isinstance(count, int) \
                    and len(seq) * count > _MAX_REPEAT:
                raise OverflowError("result too large to judge")
            if isinstance(seq, (list, tuple)) and isinstance(count, int) and count > 1:
                # repetition is how the judge's values come to share items: a thousand
                # references to one big list weigh a thousand times (issue 32, class 1);
                # a flat list (about two per item) is bounded by its length above
                weigh(seq, limit=max(_MAX_WEIGHT // count, 2 * len(seq) + 1))
    return _BINOPS[name](left, right)


_MAX_ROUND_DIGITS = 400  # round(x, n): 10 ** |n| is computed for an int x
# What ``weigh`` takes by default, and a repetition of a list (``guarded_binop``): a value
# and each item of it count one, 16 characters of text or 64 bits of an integer one more
# (items shared by a repetition count each time: ``sorted(f() * 1000)`` compares the same
# big list a thousand times).
_MAX_WEIGHT = 1_000_000
# What one guarded call or method may be given, its arguments weighed one by one (issue 50,
# A): a value the decoder admits weighs at most twice what it was charged (an item and its
# place in its container), so every leaf that arrives is judged, however large; a string
# the call iterates weighs what the list of its characters would (issue 50, D).
_MAX_CALL_WEIGHT = 2 * MAX_ITEMS
# calls of the test's own key functions per test (each guarded: a few microseconds), and
# the CPU time they may take together: a guarded body may still do one large operation per
# call (``t ** 290`` of a 4300-digit integer, within guarded_binop's bound, takes 0.26 s)
_MAX_FUNCTION_CALLS = 100_000
_MAX_FUNCTION_SECONDS = 0.5
_MAX_INT_BITS = 1 << 16  # larger ints only come from the judge's own arithmetic
_MAX_TEXT_INT_BITS = 15_000  # int <-> text is quadratic: Python's own limit is 4300 digits
_MAX_TEXT_DIGITS = 5_000
_MAX_MOD_POW_BITS = 4_096  # pow(b, e, m) costs bits(e) multiplications of bits(m)
_MAX_JOIN_CHARS = 10_000_000
_TEXT_CALLS = frozenset({"str", "repr", "int", "float", "complex"})
_KEYED_CALLS = frozenset({"set", "frozenset", "dict", "collections.Counter",
                          "collections.OrderedDict"})
# calls that make an object of each item of their first argument (``zip``: of each)
_ITEMIZING_CALLS = frozenset({"sorted", "list", "tuple", "set", "frozenset", "dict",
                              "enumerate", "zip", "reversed", "min", "max", "sum", "any",
                              "all", "collections.Counter", "collections.OrderedDict",
                              "math.fsum"})
_TEXTS = (str, bytes, bytearray)
_PLAIN_TYPES = frozenset({bool, int, float, complex, str, bytes, bytearray, list, tuple, dict,
                          set, frozenset, type(None), type({}.keys()), type({}.values()),
                          type({}.items())})


def weigh(values: Any, limit: int = _MAX_WEIGHT, int_bits: int = _MAX_INT_BITS) -> int:
    """The weight of ``values`` (see ``_MAX_WEIGHT``), refusing more than ``limit`` or an
    integer of more than ``int_bits`` bits (``OverflowError``). Linear, and it stops at the
    limit, so weighing costs no more than the call it guards would. A lazy object that a
    guarded call made (``zip``, ``enumerate``, ``reversed``) weighs one: its inputs were
    weighed when it was made."""
    stack, weight = [values], 0
    while stack:
        value = stack.pop()
        weight += 1
        kind = type(value)
        if kind is int:
            bits = value.bit_length()
            if bits > int_bits:
                raise OverflowError("an integer too large to judge")
            weight += bits >> 6
        elif kind in (str, bytes, bytearray):
            weight += len(value) >> 4
        elif kind in (list, tuple, set, frozenset):
            weight += len(value)
            if weight <= limit:
                stack.extend(value)
        elif kind is dict or isinstance(value, dict):
            weight += 2 * len(value)
            if weight <= limit:
                stack.extend(value.keys())
                stack.extend(value.values())
        if weight > limit:
            raise OverflowError("too much to judge")
    return weight


def spread_keys(keys: list[Any]) -> list[Any]:
    """``keys``, after checking that no more than ``MAX_SAME_HASH`` *distinct* ones share a
    hash, before the parent builds a set or dict of them (issue 32, class 1).

    The child chooses the values: integers, floats and tuples of them hash alike in every
    process (``k * (2**61 - 1)`` all hash to 0), so a list of 90 000 of them would make
    ``set(f(x))`` quadratic while the parent holds the GIL. Equal keys (a list with
    duplicates, the reason to call ``set``) are fine. Each key is compared with at most
    ``MAX_SAME_HASH`` others, so the check is linear.
    """
    # count the hashes at C speed first (distinct hashes never collide as keys of this
    # Counter: an int hash is its own hash); only keys of a crowded hash are compared
    counts = collections.Counter(map(hash, keys))
    if not counts or max(counts.values()) <= MAX_SAME_HASH:
        return keys
    crowded = {digest for digest, count in counts.items() if count > MAX_SAME_HASH}
    buckets: dict[int, list[Any]] = {}
    for key in keys:
        digest = hash(key)
        if digest not in crowded:
            continue
        bucket = buckets.setdefault(digest, [])
        if key not in bucket:  # identity first, then ==, against at most MAX_SAME_HASH keys
            if len(bucket) >= MAX_SAME_HASH:
                raise OverflowError("too many keys with one hash")
            bucket.append(key)
    return keys


def guarded_call(name: str, function: Any) -> Any:
    """``function`` (one of ``split.PARENT_CALLS``, as the parent resolved it), refusing
    arguments that would make the parent's work unbounded: more than ``_MAX_WEIGHT`` in all,
    integers too large to convert to text or to compute with, ``round`` with more digits than
    any float has, ``sum`` with a start that is not a number (``sum(lists, [])`` is
    quadratic), ``pow`` whose result or modular work would be huge, and keys whose hashes
    collide for the sets and dicts it builds (``spread_keys``). What is left costs at most
    about linear (``n log n`` for ``sorted``) time in what it was given.
    """
    def call(*args: Any, **kwargs: Any) -> Any:
        check_arguments(name, args, kwargs)
        if name == "pow" and len(args) == 2 and not kwargs:
            return guarded_binop("Pow", *args)
        if name in _KEYED_CALLS and len(args) == 1:
            args = (_keyed_argument(name, args[0]),)
        return function(*args, **kwargs)
    return call


def check_arguments(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise ``OverflowError`` if ``name(*args, **kwargs)`` could cost the parent more than
    about linear time in a bounded input (see ``guarded_call``)."""
    text = name in _TEXT_CALLS
    iterated = (len(args) if name == "zip" else 1) if name in _ITEMIZING_CALLS else 0
    weigh_arguments((*args, *kwargs.values()), iterated,
                    _MAX_TEXT_INT_BITS if text else _MAX_INT_BITS)
    if text and any(type(arg) in (str, bytes, bytearray) and len(arg) > _MAX_TEXT_DIGITS
                    for arg in args):
        raise OverflowError("text too long to convert")
    if name == "round":
        digits = args[1] if len(args) > 1 else kwargs.get("ndigits")
        if digits is not None and (type(digits) is not int or abs(digits) > _MAX_ROUND_DIGITS):
            raise OverflowError("result too large to judge")
    if name == "sum":
        start = args[1] if len(args) > 1 else kwargs.get("start", 0)
        if type(start) not in (int, float, complex, bool):
            raise OverflowError("the judge sums numbers only")
    if name == "pow" and len(args) + len(kwargs) > 2 and any(  # pow(b, e, m)
            type(arg) is int and arg.bit_length() > _MAX_MOD_POW_BITS
            for arg in (*args, *kwargs.values())):
        raise OverflowError("result too large to judge")


def weigh_arguments(values: tuple[Any, ...], iterated: int = 0,
                    int_bits: int = _MAX_INT_BITS) -> int:
    """The weight of a guarded call's arguments together, refusing more than
    ``_MAX_CALL_WEIGHT`` (``OverflowError``). Each is weighed by itself (the call's own
    argument tuple is not the candidate's), so a leaf the decoder admitted whole always fits
    (issue 50, A). The first ``iterated`` of them, if text, weigh what the list of their
    characters would, ``1 + 2 * len``: the call makes an object of each (issue 50, D:
    ``dict(enumerate(s))`` on 2 million characters cost 2.7 s and 565 MiB while ``s``
    weighed 125 000)."""
    total = 0
    for position, value in enumerate(values):
        if position < iterated and type(value) in _TEXTS:
            total += 1 + 2 * len(value)
            if total > _MAX_CALL_WEIGHT:
                raise OverflowError("too much to judge")
        else:
            total += weigh(value, limit=_MAX_CALL_WEIGHT - total, int_bits=int_bits)
    return total


def count_calls(limit: int, seconds: float = _MAX_FUNCTION_SECONDS,
                ) -> Callable[[Any], Callable[..., Any]]:
    """A wrapper for the test's own key functions, counting their calls against ``limit``
    and the CPU time they take (this thread's) against ``seconds``, both in all (one budget
    per test): a key runs once per item of the candidate's value, each call guarded, so
    their number and their sum are what the guards cannot see (issue 50, D). A call that
    starts within the budget runs to its end: the overrun is one guarded call at most."""
    left = [limit, seconds]

    def counted(function: Any) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            left[0] -= 1
            if left[0] < 0 or left[1] < 0:
                raise OverflowError("the test's function was called too often")
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                left[1] -= time.thread_time() - started
        return call
    return counted


def _keyed_argument(name: str, value: Any) -> Any:
    """The argument of a set or dict constructor, its keys checked by ``spread_keys``: the
    items of an iterable (``set``, ``Counter``), the first of each pair (``dict``)."""
    if isinstance(value, dict):
        return value  # its keys are in a dict already: the decoder or a guard checked them
    items = list(value)
    if name in ("dict", "collections.OrderedDict"):
        pairs = [tuple(pair) for pair in items]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError("dict needs pairs")
        spread_keys([key for key, _ in pairs])
        return pairs
    return spread_keys(items)


def guarded_method(value: Any, name: str) -> Any:
    """``value.<name>`` for one of ``split.SAFE_METHODS``, on plain data only (a decoded
    value or the test's own constant), its arguments weighed like ``guarded_call``'s;
    ``join`` is refused when its result would be huge."""
    if type(value) not in _PLAIN_TYPES:
        raise TypeError("the judge calls methods of plain data only")
    method = getattr(value, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        weigh_arguments((value, *args, *kwargs.values()))
        if name == "join" and len(args) == 1 and not kwargs:  # else str.join's own TypeError
            items = list(args[0])
            size = sum(len(item) for item in items if isinstance(item, (str, bytes)))
            if size + len(value) * len(items) > _MAX_JOIN_CHARS:
                raise OverflowError("result too large to judge")
            return method(items)
        return method(*args, **kwargs)
    return call


_BINOPS = {
    "Add": operator.add, "Sub": operator.sub, "Mult": operator.mul, "Div": operator.truediv,
    "FloorDiv": operator.floordiv, "Mod": operator.mod, "Pow": operator.pow,
    "LShift": operator.lshift, "RShift": operator.rshift, "BitOr": operator.or_,
    "BitXor": operator.xor, "BitAnd": operator.and_, "MatMult": operator.matmul,
}

_JUDGE_GLOBALS: dict[str, Any] = {
    "__builtins__": builtins, BINOP_NAME: guarded_binop, GUARD_NAME: guarded_call,
    METHOD_NAME: guarded_method,
    "math": math, "cmath": cmath,
    "sys": sys, "re": re, "string": string, "collections": collections,
    "itertools": itertools, "functools": functools, "operator": operator, "heapq": heapq,
}
