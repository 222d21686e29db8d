"""The parent's side of the protocol: read the child's records, decode values, judge tests.

Nothing here trusts the child. A record is a *claim* about what a leaf returned; a claim is
decoded only into builtin plain data (``json`` plus a depth-limited walk, never ``pickle``,
``marshal`` or ``eval``) and then compared with the parent's own expected values by the
parent's own Python. Exit codes, output and exceptions are never read as a pass: a test whose
leaves did not all arrive as valid records fails.
"""

from __future__ import annotations

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
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .split import BINOP_NAME, GUARD_NAME, VALUES_NAME, SplitPlan

MAX_DEPTH = 60  # the child refuses to encode deeper than 50
# The parent's work per completion is bounded by what decoding costs, not by bytes (issue 32,
# class 2: a 2.9 MB record of a million empty lists cost 1.6-2.4 s of the trainer's CPU).
# The largest honest values of MBPP's 974 references and the course's problems hold at most
# 644 JSON containers and about 1000 values per completion (all their records: 7 KB).
MAX_ITEMS = 100_000  # values decoded per completion (a container and each item: one each)
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
    if payload is None or kind in (bool, int, float):
        return payload
    if kind is str:
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
                        and _evaluate_judge(split.judge, values, plan.imports))
    return tuple(verdicts)


def _evaluate_judge(judge: Any, values: list[Any],
                    imports: tuple[tuple[str, str], ...] = ()) -> bool:
    namespace = dict(_JUDGE_GLOBALS)
    namespace.update(_resolve_imports(imports))
    namespace[VALUES_NAME] = values
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
    return _BINOPS[name](left, right)


_MAX_ROUND_DIGITS = 400  # round(x, n): 10 ** |n| is computed for an int x


def guarded_call(name: str, function: Any) -> Any:
    """``function`` (one of ``split.GUARDED_CALLS``, as the parent resolved it), refusing
    arguments that would make the parent's work unbounded: ``round`` with more digits than
    any float has, ``sum`` with a start that is not a number (``sum(lists, [])`` is
    quadratic). The others cost at most linear time in values the decoder already bounded.
    """
    def call(*args: Any, **kwargs: Any) -> Any:
        if name == "round":
            digits = args[1] if len(args) > 1 else kwargs.get("ndigits")
            if digits is not None and (type(digits) is not int
                                       or abs(digits) > _MAX_ROUND_DIGITS):
                raise OverflowError("result too large to judge")
        if name == "sum":
            start = args[1] if len(args) > 1 else kwargs.get("start", 0)
            if type(start) not in (int, float, complex, bool):
                raise OverflowError("the judge sums numbers only")
        return function(*args, **kwargs)
    return call


_BINOPS = {
    "Add": operator.add, "Sub": operator.sub, "Mult": operator.mul, "Div": operator.truediv,
    "FloorDiv": operator.floordiv, "Mod": operator.mod, "Pow": operator.pow,
    "LShift": operator.lshift, "RShift": operator.rshift, "BitOr": operator.or_,
    "BitXor": operator.xor, "BitAnd": operator.and_, "MatMult": operator.matmul,
}

_JUDGE_GLOBALS: dict[str, Any] = {
    "__builtins__": builtins, BINOP_NAME: guarded_binop, GUARD_NAME: guarded_call,
    "math": math, "cmath": cmath,
    "sys": sys, "re": re, "string": string, "collections": collections,
    "itertools": itertools, "functools": functools, "operator": operator, "heapq": heapq,
}
