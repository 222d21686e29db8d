"""The parent's guards on the candidate's values (``grpo_core.sandbox.judge``), at their
boundaries: what each refuses, what it lets through, and that it measures what it claims.
Pure functions: no sandbox process runs here."""

from __future__ import annotations

import collections

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
from grpo_core.sandbox.split import plan_tests

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


def test_spread_keys_passes_no_keys_and_keys_of_distinct_hashes_through():
    assert spread_keys([]) == []
    distinct = list(range(5 * MAX_SAME_HASH))
    assert spread_keys(distinct) is distinct


def test_spread_keys_checks_every_crowded_hash_on_its_own_wherever_its_keys_stand():
    crowd = [k * MERSENNE for k in range(1, MAX_SAME_HASH + 2)]  # one too many, all hash 0
    with pytest.raises(OverflowError, match="one hash"):
        spread_keys([1, 2] + crowd)  # keys of other hashes first
    # two hashes, each crowded by a repeat but with no more distinct keys than the bound
    first = [k * MERSENNE for k in range(1, MAX_SAME_HASH + 1)]
    second = [k * MERSENNE + 1 for k in range(1, MAX_SAME_HASH + 1)]
    both = first + first[:1] + second + second[:1]
    assert spread_keys(both) is both


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


# --- more boundaries (the survivors of `make mutate`, 3 December) ------------------------------


def test_a_flat_list_repeats_up_to_its_own_weight_and_no_further():
    """``seq * n`` of a list is weighed with a limit of ``max(_MAX_WEIGHT // n, 2 * len + 1)``:
    a flat list of small ints (weight exactly ``2 * len + 1``) passes even when
    ``_MAX_WEIGHT // n`` is smaller, one more unit of weight (a 64-bit int) does not."""
    count = 1000
    flat = [0] * 1000  # weight 2001, while _MAX_WEIGHT // count is 1000
    assert judge._MAX_WEIGHT // count < weigh(flat) == 2 * len(flat) + 1
    assert guarded_binop("Mult", flat, count) == [0] * (len(flat) * count)
    heavier = [2**64] + [0] * 999  # weight 2002: one past the flat bound
    with pytest.raises(OverflowError, match="too much"):
        guarded_binop("Mult", heavier, count)
    with pytest.raises(OverflowError, match="too much"):
        guarded_binop("Mult", count, heavier)  # either side may be the sequence


def test_repetition_weighs_from_two_copies_on_and_never_divides_by_a_small_count():
    """Repeating twice already shares every item (weighed against ``_MAX_WEIGHT // 2``);
    ``* 1`` and ``* 0`` share nothing, so they are not weighed (and never divide by 0)."""
    heavy = [list(range(1000))] * 300  # weight about 600 000: over half of _MAX_WEIGHT
    assert judge._MAX_WEIGHT // 2 < weigh(heavy) <= judge._MAX_WEIGHT
    with pytest.raises(OverflowError, match="too much"):
        guarded_binop("Mult", heavy, 2)
    heavier = [list(range(1000))] * 1001  # weight about 2 million: more than _MAX_WEIGHT
    assert guarded_binop("Mult", heavier, 1) == heavier
    assert guarded_binop("Mult", [1, 2], 0) == [] and guarded_binop("Mult", 0, (1,)) == ()
    assert guarded_binop("Mult", [1, 2], -3) == []


def test_weigh_stops_at_its_limit_before_looking_inside():
    """A container whose own weight reaches the limit exactly still has items to count: any
    item puts it over (the limit is inclusive, the items are not skipped)."""
    assert weigh([], limit=1) == 1 and weigh({}, limit=1) == 1
    with pytest.raises(OverflowError, match="too much"):
        weigh([0] * 49, limit=50)  # 1 + 49 = 50, then its 49 items
    with pytest.raises(OverflowError, match="too much"):
        weigh({"a": 1}, limit=3)  # 1 + 2 = 3, then a key and a value


def test_weigh_counts_dict_subclasses_like_dicts():
    """``Counter`` and ``OrderedDict`` (what a guarded ``collections.Counter(...)`` returns,
    then handed to the next guarded call) weigh what the same dict weighs."""
    for made in (collections.Counter({"a": 1}), collections.OrderedDict(a=1),
                 collections.defaultdict(int, a=1)):
        assert weigh(made) == weigh({"a": 1}) == 5
    with pytest.raises(OverflowError, match="too much"):
        weigh(collections.Counter(range(400_000)))


def test_ordered_dict_checks_its_keys_not_its_pairs():
    """``collections.OrderedDict(pairs)`` is keyed by the first of each pair, like ``dict``:
    colliding keys are refused even when the pairs (their values differ) do not collide."""
    pairs = [(k * MERSENNE, k) for k in range(1, MAX_SAME_HASH + 2)]
    assert len({hash(pair) for pair in pairs}) == len(pairs)  # the pairs spread...
    for name, function in (("collections.OrderedDict", collections.OrderedDict),
                           ("dict", dict)):
        with pytest.raises(OverflowError, match="one hash"):  # ...their keys do not
            guarded_call(name, function)(pairs)
        assert guarded_call(name, function)(pairs[:MAX_SAME_HASH]) == dict(pairs[:MAX_SAME_HASH])
    with pytest.raises(ValueError, match="pairs"):
        guarded_call("collections.OrderedDict", collections.OrderedDict)([("a", 1, 2)])


def test_methods_get_their_keyword_arguments_and_join_its_exact_bound():
    """A safe method receives the keywords the test passes; ``join`` is allowed up to
    ``_MAX_JOIN_CHARS`` characters inclusive, and called wrongly fails as ``str.join`` does."""
    assert guarded_method("a,b,c", "split")(",", maxsplit=1) == ["a", "b,c"]
    assert guarded_method("a b", "split")(sep=None) == ["a", "b"]
    limit = judge._MAX_JOIN_CHARS
    assert len(guarded_method("", "join")(["x" * 1000] * (limit // 1000))) == limit
    assert len(guarded_method("-", "join")(["x" * 999] * (limit // 1000))) == limit - 1
    for args, kwargs in (((), {}), ((["a"], ["b"]), {}), ((), {"iterable": ["a"]})):
        with pytest.raises(TypeError):
            guarded_method(", ", "join")(*args, **kwargs)


# --- the decoder's budget -----------------------------------------------------------------------


def test_a_long_integer_costs_the_square_of_its_digits():
    """``int(str)`` is quadratic: a 4300-digit integer is charged ``4300**2 // 100_000`` =
    184 values, on top of the one it is, both by ``_Budget.parse_int`` and through a record."""
    digits = "9" * 4300
    budget = judge._Budget(184)
    assert budget.parse_int(digits) == int(digits) and budget.left == 0
    with pytest.raises(ValueError, match="too many values"):
        judge._Budget(183).parse_int(digits)
    plan = plan_tests("def f(x):\n    return x\n", "", ["assert f(1) == 1"])
    one = judge._Budget(judge.MAX_ITEMS)  # what one such integer costs in a record: its
    judge.decode_value(one.parse_int(digits), budget=one)  # parse, and one value per 64 bits
    cost = judge.MAX_ITEMS - one.left  # (issue 50)
    assert cost == 1 + 184 + int(digits).bit_length() // 64
    fits = judge.MAX_ITEMS // cost
    many = ",".join([digits] * (fits + 1)).encode()  # more than MAX_ITEMS
    records = judge.parse_records(b'R\nK\n[0,"v",[' + many + b']]\nD\n', plan)
    assert records.values == {} and records.malformed == 1
    fewer = ",".join([digits] * (fits - 1)).encode()
    assert len(judge.parse_records(b'R\nK\n[0,"v",[' + fewer + b']]\nD\n', plan).values[0]) \
        == fits - 1


def test_the_container_budget_is_spent_one_per_container_to_exactly_zero():
    """``_Budget(items, containers)`` decodes exactly ``containers`` JSON arrays and objects;
    the next one is refused."""
    budget = judge._Budget(100, 2)
    budget.spend_container()
    budget.spend_container()
    assert budget.containers == 0
    with pytest.raises(ValueError, match="too many containers"):
        budget.spend_container()
    assert judge.decode_value([[1], 2], budget=judge._Budget(100, 2)) == [[1], 2]
    with pytest.raises(ValueError, match="too many containers"):
        judge.decode_value([[1], [2]], budget=judge._Budget(100, 2))


def test_admits_refuses_a_line_by_its_commas_and_brackets_at_the_exact_bounds():
    """A record's line shows at least one value per comma past its own two and one container
    per ``[`` or ``{`` past its own one: it is refused unparsed when that exceeds what is left,
    admitted when it equals it."""
    budget = judge._Budget(3, 2)
    assert budget.admits(b'[0,"v",[1,2,3,4]]')  # 5 commas: 3 values past the record's two
    assert not budget.admits(b'[0,"v",[1,2,3,4,5]]')  # 6 commas: 4 > 3
    assert budget.admits(b'[0,"v",[[]]]')  # 3 brackets: 2 containers past its own
    assert not budget.admits(b'[0,"v",[[[]]]]')  # 4: 3 > 2
    assert not budget.admits(b'[0,"v",{"a":{"b":{}}}]')  # braces count as brackets do


def test_weigh_arguments_charges_iterated_text_per_character_and_adds_the_rest():
    """The first ``iterated`` texts weigh ``1 + 2 * len`` each, exactly up to the call's
    bound; the others weigh what ``weigh`` says, and the weights add up."""
    bound = judge._MAX_CALL_WEIGHT
    half = bound // 2 - 2  # two texts, of ``half`` characters and of one: exactly the bound
    assert judge.weigh_arguments(("a" * half, "b"), iterated=2) == bound
    with pytest.raises(OverflowError):
        judge.weigh_arguments(("a" * half, "bc"), iterated=2)
    listed = [1, (2, 3), "xyz"]
    assert judge.weigh_arguments(("ab", listed, 7), iterated=1) == \
        5 + weigh(listed) + weigh(7)


def test_a_method_weighs_its_own_text_as_weigh_does_not_per_character():
    """``guarded_method`` iterates nothing: a text past half the call's bound, which as an
    iterated argument would be refused, is weighed as text (one unit per 16 characters)."""
    text = "a" * (judge._MAX_CALL_WEIGHT // 2 + 1)
    assert guarded_method(text, "startswith")("a") is True
