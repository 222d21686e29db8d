"""The hostile suite: every attack scores 0, in time, and leaves the evaluator working and clean.

For each attack class in ``sandbox_attacks.py``: the completion scores 0; ``run_tests`` returns within
its deadline + 1 s; nothing outside the sandbox was reached (signals, sockets, victim files);
no process or file of the sandbox uid is left; and a correct solution scores 1.0 right after.
"""

from __future__ import annotations

import time
from string import Template

import pytest
from sandbox_attacks import (
    ADD_TESTS,
    ATTACKS,
    Attack,
    leftovers,
    nothing_reached,
    time_scale,
    wait_for_clean_ups,
)

from grpo_core.sandbox import probe as sandbox_probe
from grpo_core.sandbox import run_tests
from grpo_core.sandbox.zygote import _zygotes

DEADLINE_S = 0.5
CORRECT = "def add(a, b):\n    return a + b\n"


def _fill(text: str, values: dict[str, str]) -> str:
    return Template(text).substitute(values)


def _alive_zygotes() -> set[int]:
    return {z.process.pid for z in _zygotes.values() if z.alive()}


def test_the_catalogue_covers_at_least_25_attack_classes():
    assert len({attack.name for attack in ATTACKS}) == len(ATTACKS) >= 25
    assert {attack.category for attack in ATTACKS} == {"resources", "forgery", "escape"}


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_scores_zero_in_time_and_leaves_nothing(attack: Attack, context, level,
                                                       isolation):
    if level < attack.level:
        pytest.skip(f"needs isolation level {attack.level} (a separate uid); this is {level}")
    if isolation.portable and attack.portable_gap:  # GRPO_SANDBOX=portable (test_portable.py)
        pytest.skip(f"the portable tier does not stop it: {attack.portable_gap}")
    if isolation.portable and attack.portable_needs and \
            not getattr(sandbox_probe._get_active()[1], attack.portable_needs):
        pytest.skip(f"the portable tier stops it only where {attack.portable_needs}")
    zygotes_before = _alive_zygotes()
    tests = [_fill(test, context.values) for test in attack.tests]
    started = time.monotonic()
    result = run_tests(_fill(attack.code, context.values), tests, timeout_s=DEADLINE_S)
    elapsed = time.monotonic() - started

    assert result.passed == 0, result
    assert elapsed <= (DEADLINE_S + 1.0) * time_scale(), f"returned after {elapsed:.2f} s"
    assert nothing_reached(context) == []
    assert wait_for_clean_ups(), "a background clean-up never ended"
    assert leftovers(result.uid, isolation.base_dir) == []
    assert zygotes_before <= _alive_zygotes(), "the attack killed a zygote"
    if attack.followup:
        probe = run_tests(attack.followup, list(ADD_TESTS))
        assert probe.passed == 0, f"the follow-up found what the attack planted: {probe}"
        assert wait_for_clean_ups() and leftovers(probe.uid, isolation.base_dir) == []
    after = run_tests(CORRECT, list(ADD_TESTS))
    assert after.fraction == 1.0, after
