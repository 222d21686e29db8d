"""The parent's guards on the candidate's values (``grpo_core.sandbox.judge``), at their
boundaries: what each refuses, what it lets through, and that it measures what it claims.
Pure functions: no sandbox process runs here."""

from __future__ import annotations

import pytest

from grpo_core.sandbox import judge
from grpo_core.sandbox.judge import (
    MAX_SAME_HASH,
    check_arguments,
    guarded_binop,
    guarded_call,
    guarded_method,
    spread_keys,
    weigh,
)

MERSENNE = 2**61 - 1  # k * MERSENNE hash to 0 for every k


# --- weigh ------------------------------------------------------------------------------------


def test_weigh_counts_items_bits_and_characters_as_documented():
    assert weigh(5) == 1
    assert weigh(2**640) == 1 + 641 // 64  # an int: one, plus its bits / 64
    assert weigh("x" * 160) == 1 + 10  # text: one, plus its length / 16
    assert weigh([1, 2, 3]) == 1 + 3 + 3  # the list, its length, and each item
    assert weigh({"a": 1}) == 1 + 2 + 1 + 1  # the dict, twice its length, a key, a value
    assert weigh((1, [2])) == 1 + 2 + 1 + 1 + 1 + 1


def test_weigh_refuses_past_its_limit_and_large_ints_at_their_exact_bounds():
    weigh([0] * 49, limit=100)  # 1 + 49 + 49 = 99
    with pytest.raises(OverflowError, match="too much"):
        weigh([0] * 50, limit=100)  # 1 + 50 + 50 = 101
    weigh(2**99 - 1, int_bits=99)
    with pytest.raises(OverflowError, match="integer too large"):
        weigh(2**99, int_bits=99)
    with pytest.raises(OverflowError, match="too much"):
        weigh([[0] * 30] * 10, limit=100)  # shared items weigh each time they appear


# --- check_arguments ------------------------------------------------------------------------


def test_text_conversions_take_smaller_ints_and_shorter_text_than_other_calls():
    big = 2**judge._MAX_TEXT_INT_BITS  # one bit past the text bound
    check_arguments("abs", (big,), {})  # arithmetic: up to 65 536 bits
    for name in ("str", "repr", "int"):
        with pytest.raises(OverflowError):
            check_arguments(name, (big,), {})
    check_arguments("str", (big - 1 >> 1,), {})
    digits = "9" * judge._MAX_TEXT_DIGITS
    check_arguments("int", (digits,), {})  # exactly at the bound: fine
    with pytest.raises(OverflowError, match="text too long"):
        check_arguments("int", (digits + "9",), {})
    check_arguments("len", (digits + "9" * 10,), {})  # only conversions are bounded


def test_round_sum_and_modular_pow_at_their_bounds():
    check_arguments("round", (1.5, judge._MAX_ROUND_DIGITS), {})
    check_arguments("round", (1.5,), {"ndigits": -judge._MAX_ROUND_DIGITS})
    for bad in ((1.5, judge._MAX_ROUND_DIGITS + 1), (1.5, 2.0)):
        with pytest.raises(OverflowError):
            check_arguments("round", bad, {})
    with pytest.raises(OverflowError):
        check_arguments("round", (1.5,), {"ndigits": -judge._MAX_ROUND_DIGITS - 1})
    check_arguments("sum", ([1, 2], 0.5), {})
    check_arguments("sum", ([1, 2],), {"start": True})
    for start in ([], "", (1,)):
        with pytest.raises(OverflowError, match="sums numbers only"):
            check_arguments("sum", ([[1]], start), {})
    with pytest.raises(OverflowError, match="sums numbers only"):
        check_arguments("sum", ([[1]],), {"start": []})
    edge = 2**judge._MAX_MOD_POW_BITS - 1
    check_arguments("pow", (3, edge, edge), {})
    check_arguments("pow", (3, edge + 1), {})  # two arguments: guarded_binop bounds it
    with pytest.raises(OverflowError):
        check_arguments("pow", (3, edge + 1, 7), {})
    with pytest.raises(OverflowError):
        check_arguments("pow", (3, 5), {"mod": edge + 1})


# --- guarded_binop ------------------------------------------------------------------------------


def test_powers_shifts_and_repetitions_are_bounded_before_they_run():
    assert guarded_binop("Pow", 2, judge._MAX_EXPONENT) == 2**judge._MAX_EXPONENT
    with pytest.raises(OverflowError):
        guarded_binop("Pow", 2, judge._MAX_EXPONENT + 1)
    assert guarded_binop("Pow", 0, 10**9) == 0  # no bits: nothing to grow
    with pytest.raises(OverflowError):  # the result's bits bound even 1 ** n (cheap, refused)
        guarded_binop("Pow", 1, 10**9)
    with pytest.raises(OverflowError):
        guarded_binop("LShift", 1, judge._MAX_EXPONENT + 1)  # 1 << n is not cheap
    assert guarded_binop("LShift", 0, 10**9) == 0
    with pytest.raises(OverflowError):
        guarded_binop("Pow", 2**1000, 5000)  # the result's bits, not the exponent alone
    with pytest.raises(OverflowError, match="format"):
        guarded_binop("Mod", "%d", 5)
    assert guarded_binop("Mod", 7, 5) == 2
    assert guarded_binop("Mult", [0], judge._MAX_REPEAT) == [0] * judge._MAX_REPEAT
    for left, right in (([0], judge._MAX_REPEAT + 1), (judge._MAX_REPEAT + 1, "a")):
        with pytest.raises(OverflowError):
            guarded_binop("Mult", left, right)
    with pytest.raises(OverflowError):
        guarded_binop("Mult", [list(range(1000))], 2000)  # a thousand shared references
    assert guarded_binop("Mult", [1, 2], 3) == [1, 2, 1, 2, 1, 2]
    assert guarded_binop("Sub", 5, 3) == 2 and guarded_binop("FloorDiv", 7, 2) == 3


# --- spread_keys and the keyed calls ----------------------------------------------------------


def test_spread_keys_counts_distinct_keys_per_hash_at_its_bound():
    same_hash = [k * MERSENNE for k in range(1, MAX_SAME_HASH + 1)]
    assert spread_keys(same_hash) == same_hash  # exactly the bound: fine
    with pytest.raises(OverflowError, match="one hash"):
        spread_keys(same_hash + [(MAX_SAME_HASH + 1) * MERSENNE])
    repeated = same_hash * 50  # duplicates are not distinct keys
    assert spread_keys(repeated) is repeated


def test_guarded_set_and_dict_check_the_keys_they_build():
    colliding = [k * MERSENNE for k in range(1, MAX_SAME_HASH + 2)]
    for name, function in (("set", set), ("frozenset", frozenset)):
        with pytest.raises(OverflowError):
            guarded_call(name, function)(colliding)
        assert guarded_call(name, function)([1, 1, 2]) == function({1, 2})
    with pytest.raises(OverflowError):
        guarded_call("dict", dict)([(k, 0) for k in colliding])
    assert guarded_call("dict", dict)([("a", 1), ["b", 2]]) == {"a": 1, "b": 2}
    assert guarded_call("dict", dict)({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="pairs"):
        guarded_call("dict", dict)([("a", 1, 2)])
    assert guarded_call("pow", pow)(2, 10) == 1024
    with pytest.raises(OverflowError):
        guarded_call("pow", pow)(2, judge._MAX_EXPONENT + 1)


# --- guarded_method ---------------------------------------------------------------------------


class Sly(str):
    def startswith(self, *args):  # a candidate's override: must never run in the parent
        raise AssertionError("called the candidate's method")


def test_methods_run_on_plain_values_only_and_join_is_bounded():
    assert guarded_method("a,b", "split")(",") == ["a", "b"]
    with pytest.raises(TypeError, match="plain data"):
        guarded_method(Sly("x"), "startswith")
    assert guarded_method(", ", "join")(["a", "b"]) == "a, b"
    assert guarded_method(", ", "join")(iter(["a"])) == "a"
    limit = judge._MAX_JOIN_CHARS
    guarded_method("", "join")(["x" * 1000] * (limit // 1000 // 2))
    with pytest.raises(OverflowError, match="too large"):
        guarded_method("-" * 1000, "join")(["x"] * (limit // 1000 + 1))
    with pytest.raises(OverflowError, match="too much"):
        guarded_method("abc", "count")(["x"] * judge._MAX_WEIGHT)
