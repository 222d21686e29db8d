"""Reward functions: the lecture's table row for row, the whitespace rule, TRL's calling
convention, length, code extraction, the unit-test reward and experiment 3's proxies."""

from __future__ import annotations

import pytest

from grpo_core.rewards import (
    LONG_CODE_CHARS,
    accuracy_reward,
    defines_function,
    defines_function_reward,
    extract_answer,
    extract_code,
    format_reward,
    length_reward,
    long_function_reward,
    make_length_reward,
    unit_test_reward,
)

# The lecture's table: answer, reasoning -> format, accuracy, total.
LECTURE_TABLE = [
    ("9 rows of 8 seats is 9 * 8 = 72 seats.\n<answer>72</answer>", 1.0, 2.0, 3.0),
    ("Seats are usually 70-something, so I'll guess.\n<answer>72</answer>", 1.0, 2.0, 3.0),
    ("9 * 8 = 71, since 9 * 8 = 9 * 7 + 8.\n<answer>71</answer>", 1.0, 0.0, 1.0),
    ("9 rows of 8 seats is 9 * 8 = 72 seats. The answer is 72", 0.0, 0.0, 0.0),
    ("9 * 8 = 72.\n<answer>72</answer>\nLet me double-check that: yes, 72.", 0.0, 0.0, 0.0),
]
TRL_EXTRAS = {"prompts": ["How many seats?"] * 5, "completion_ids": [[1, 2]] * 5,
              "trainer_state": object(), "log_extra": None}


def test_the_lecture_table_row_for_row():
    completions = [row[0] for row in LECTURE_TABLE]
    formats = format_reward(completions, answer=["72"] * 5, **TRL_EXTRAS)
    accuracies = accuracy_reward(completions, answer=["72"] * 5, **TRL_EXTRAS)
    for row, fmt, acc in zip(LECTURE_TABLE, formats, accuracies, strict=True):
        assert (fmt, acc, fmt + acc) == row[1:], row[0]


@pytest.mark.parametrize(("completion", "answer"), [
    ("<answer>72</answer>", "72"),
    ("  <answer>72</answer>\n\n", "72"),
    ("reasoning\n<answer>\n 72\t</answer>", "72"),
    ("<answer>the cat</answer>", "the cat"),
])
def test_whitespace_is_allowed_at_the_ends_and_inside_the_tags(completion, answer):
    assert extract_answer(completion) == answer


@pytest.mark.parametrize("completion", [
    "\t<answer>72</answer>\t", "\r\n<answer>72</answer>\r\n",
    " \t\r\n<answer>72</answer>\n\r\t ", "Reasoning.\r\n<answer>\t72\r\n</answer>\r\n",
])
def test_tabs_and_crlf_at_the_ends_count_as_whitespace(completion):
    assert extract_answer(completion) == "72"
    assert format_reward([completion]) == [1.0]
    assert accuracy_reward([completion], answer=["72"]) == [2.0]


@pytest.mark.parametrize("completion", [
    "\t<answer>72</answer>\tx", "<answer>72</answer>\r\n.", "\t<answer>\t\r\n</answer>",
])
def test_text_after_the_closing_tag_or_an_empty_answer_breaks_the_format_with_tabs_and_crlf(completion):
    assert extract_answer(completion) is None
    assert format_reward([completion]) == [0.0]


@pytest.mark.parametrize("completion", [
    "<answer>72</answer>.", "<answer>72</answer> ok", "<answer></answer>", "<answer>  </answer>",
    "<answer>71</answer> <answer>72</answer>", "</answer>72<answer>", "<answer>72", "72",
    "<ANSWER>72</ANSWER>", "<answer>7<answer>2</answer>",
])
def test_anything_else_breaks_the_format(completion):
    assert extract_answer(completion) is None
    assert format_reward([completion]) == [0.0]


def test_accuracy_compares_text_or_numbers():
    completions = ["<answer>72.0</answer>", "<answer>+72</answer>", "<answer>072</answer>",
                   "<answer>72 seats</answer>", "<answer>seventy-two</answer>"]
    assert accuracy_reward(completions, answer=[72, "72", 72.0, "72", "72"]) == [
        2.0, 2.0, 2.0, 0.0, 0.0]


def test_conversational_completions_score_their_last_message():
    chat = [[{"role": "assistant", "content": "9 * 8 = 72 <answer>72</answer>"}]]
    assert format_reward(chat) == [1.0]
    assert accuracy_reward(chat, answer=["72"]) == [2.0]


def test_accuracy_needs_one_answer_per_completion():
    with pytest.raises(TypeError, match="'answer'"):
        accuracy_reward(["<answer>1</answer>"])
    with pytest.raises(ValueError, match="one value per completion"):
        accuracy_reward(["<answer>1</answer>"] * 2, answer=["1"])


def test_length_reward_is_minus_the_distance_to_20_characters():
    assert length_reward(["x" * 20, "", "x" * 25], **TRL_EXTRAS) == [0.0, -20.0, -5.0]
    five = make_length_reward(5)
    assert five(["abcde", "abc"]) == [0.0, -2.0]
    assert five.__name__ == length_reward.__name__ == "length_reward"  # TRL logs by name
    assert "5" in five.__doc__ and "20" in length_reward.__doc__


def test_length_reward_counts_whitespace_characters():
    assert length_reward([" " * 20, "\t\n" * 10, "a b\tc\r\n", "\n" * 23]) == [
        0.0, 0.0, -13.0, -3.0]
    chat = [[{"role": "assistant", "content": " " * 18}]]
    assert length_reward(chat) == [-2.0]


# ---------------------------------------------------------------- code extraction

@pytest.mark.parametrize(("completion", "code"), [
    ("Here:\n```python\ndef f():\n    return 1\n```\nDone.", "def f():\n    return 1"),
    ("```\ndef f():\n    return 1\n```", "def f():\n    return 1"),
    ("```python\nprint(1)\n```\n```python\ndef f():\n    return 1\n```", "def f():\n    return 1"),
    ("```python\ndef f():\n    return 1\n", "def f():\n    return 1"),
    ("def f():\n    return 1\n", "def f():\n    return 1"),
    ("Sure! Here it is.\ndef f():\n    return 1\nThis returns one.", "def f():\n    return 1"),
    ("I cannot write code today.", ""),
    ("```text\nnot code\n```", ""),
])
def test_extract_code_finds_fenced_or_bare_code(completion, code):
    assert extract_code(completion) == code


# ---------------------------------------------------------------- the unit-test reward

TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(4, 4) == 9"]


def test_unit_test_reward_is_the_fraction_of_asserts_passed():
    completions = ["```python\ndef add(a, b):\n    return a + b\n```",
                   "def add(a, b):\n    return a * b + 2\n",
                   "no code at all",
                   "```python\ndef add(a, b):\n    while True:\n        pass\n```"]
    rewards = unit_test_reward(completions, tests=[TESTS] * 4, timeout_s=1.0, **TRL_EXTRAS)
    assert rewards == [pytest.approx(2 / 3), pytest.approx(0.0), 0.0, 0.0]


def test_unit_test_reward_uses_the_setup_code_column():
    completion = "class Box:\n    def __init__(self, v):\n        self.v = v\ndef unbox(b):\n    return b.v\n"
    rewards = unit_test_reward([completion, completion], tests=[["assert unbox(box) == 3"]] * 2,
                               setup_code=["box = Box(3)", "box = Box(4)"])
    assert rewards == [1.0, 0.0]


def test_the_same_completion_always_gets_the_same_score_in_order():
    completions = [f"def add(a, b):\n    return a + b + {k % 3}\n" for k in range(12)]
    first = unit_test_reward(completions, tests=[TESTS] * 12, max_workers=3)
    again = unit_test_reward(completions[::-1], tests=[TESTS] * 12, max_workers=2)[::-1]
    assert first == again == [pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0] * 4


# ------------------------------------------------------------ experiment 3's gameable proxies

SOLUTION = "```python\ndef add(a, b):\n    return a + b\n```"
STUB = "def add(a, b):\n    pass\n"
PADDED_WRONG = "def add(a, b):\n" + "    # adds the two numbers carefully\n" * 8 + "    return a - b\n"


def test_defines_function_reward_checks_the_name_never_the_behaviour():
    completions = [SOLUTION, STUB, PADDED_WRONG, "def plus(a, b):\n    return a + b\n",
                   "def add(a, b:\n    return", "no code at all"]
    rewards = defines_function_reward(completions, entry_point=["add"] * 6,
                                      prompts=["Write add."] * 6, trainer_state=object())
    assert rewards == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert unit_test_reward([SOLUTION, STUB, PADDED_WRONG], tests=[TESTS[:2]] * 3) == [1.0, 0.0, 0.0]


def test_long_function_reward_pays_a_padded_wrong_answer_more_than_a_short_right_one():
    completions = [SOLUTION, STUB, PADDED_WRONG, "def plus(a, b):\n" + "    # pad\n" * 40]
    rewards = long_function_reward(completions, entry_point=["add"] * 4)
    solution_code = extract_code(SOLUTION)
    assert rewards[0] == pytest.approx(len(solution_code) / LONG_CODE_CHARS)
    assert rewards[1] == pytest.approx(len(STUB.strip("\n")) / LONG_CODE_CHARS)
    assert rewards[2] == 1.0 > rewards[0]  # capped at full marks; never runs the code
    assert rewards[3] == 0.0  # long, but not the function the tests call


def test_the_proxies_take_conversational_completions():
    conversation = [[{"role": "assistant", "content": STUB}]]
    assert defines_function_reward(conversation, entry_point=["add"]) == [1.0]
    assert long_function_reward(conversation, entry_point=["add"]) == [
        pytest.approx(len(STUB.strip("\n")) / LONG_CODE_CHARS)]


# ---------------------------------------------------------------- edges of what each reward reads

def test_a_missing_column_is_named_in_the_error():
    with pytest.raises(TypeError, match="dataset column 'tests'"):
        unit_test_reward(["def f(): pass"])
    with pytest.raises(ValueError, match="column 'setup_code' must hold one value per completion"):
        unit_test_reward(["def f(): pass"], tests=[["assert f() is None"]], setup_code=["", ""])
    with pytest.raises(ValueError, match="column 'tests' must hold one value per completion"):
        unit_test_reward(["def f(): pass"] * 2, tests=[["assert f() is None"]])
    for reward in (defines_function_reward, long_function_reward):
        with pytest.raises(TypeError, match="dataset column 'entry_point'"):
            reward(["def f(): pass"])
        with pytest.raises(ValueError, match="column 'entry_point' must hold one value"):
            reward(["def f(): pass"], entry_point=["f", "g"])


def test_a_completion_must_be_text_or_a_list_of_messages():
    for bad in ([], [1, 2], ["a", "b"], 3):
        with pytest.raises(TypeError, match="a string or a list of messages"):
            format_reward([bad])
    assert length_reward([[{"role": "assistant"}]]) == [-20.0]  # no content: the empty text


def test_numbers_match_only_when_both_are_plain_decimals():
    completions = ["<answer>1e2</answer>", "<answer>100</answer>", "<answer>0x10</answer>"]
    assert accuracy_reward(completions, answer=["100", "1e2", "16"]) == [0.0, 0.0, 0.0]
    assert accuracy_reward(["<answer>1e2</answer>"], answer=["1e2"]) == [2.0]  # same text


@pytest.mark.parametrize("label", ["python", "Python", "PYTHON", "py", "PY", "python3",
                                   "Python3", ""])
def test_python_fences_are_read_whatever_their_case(label):
    # code that only a fence marks as code (no def) and that starts and ends with an X
    assert extract_code(f"Code:\n```{label}\nX = 1\nprint(X)\n```\nDone.") == "X = 1\nprint(X)"


def test_other_fences_are_not_code():
    assert extract_code("```javascript\nfunction f() {}\n```") == ""
    # a javascript block is skipped: the code is then the first python block
    assert extract_code("```js\nlet x = 1\n```\n```py\nx = 2\n```") == "x = 2"


def test_bare_code_keeps_the_first_line_that_parses_alone():
    assert extract_code("Here:\ndef f(): return 1\nThat is all, folks.") == "def f(): return 1"
    assert extract_code("\nX = 1\nprint(X)\n\n") == "X = 1\nprint(X)"  # parses as it is
    assert extract_code("Sure:\ndef broken(:\n    pass\n") == ""  # nothing of it parses


def test_defines_function_needs_code_that_parses_and_a_name():
    assert defines_function("def f():\n    return 1\n", "f")
    assert not defines_function("def f(:\n    return 1\n", "f")
    assert not defines_function("def f():\n    return 1\n", "")
    assert not defines_function("class f:\n    pass\n", "f")
    assert defines_function("async def f():\n    return 1\n", "f")


def test_long_function_reward_pays_nothing_for_long_code_without_the_function():
    other = "def plus(a, b):\n" + "    a = a + 0\n" * 30 + "    return a + b\n"
    assert defines_function_reward([other], entry_point=["add"]) == [0.0]
    assert long_function_reward([other], entry_point=["add"]) == [0.0]
    assert long_function_reward([other], entry_point=["plus"]) == [1.0]


def test_extract_code_keeps_the_codes_own_spaces_and_drops_only_blank_lines_around_it():
    fenced = "```python\n\n    # an indented comment\nx = 1\t\n\n```"
    assert extract_code(fenced) == "    # an indented comment\nx = 1\t"
    assert extract_code("\n    # a note\nx = 1\n\n") == "    # a note\nx = 1"


def test_bare_code_is_given_up_after_200_trailing_lines():
    assert extract_code("def f(): return 1\n" + "and some prose\n" * 199) == "def f(): return 1"
    assert extract_code("def f(): return 1\n" + "and some prose\n" * 200) == ""



# ---------------------------------------------------------------- detail (notebook 11's gaming)


def test_detail_reward_pays_a_tenth_per_distinct_word():
    from grpo_core.rewards import DETAIL_POINTS_PER_WORD, detail_reward

    assert DETAIL_POINTS_PER_WORD == 0.1
    scores = detail_reward(["Rain.", "Rain, rain and sun!", "", "It's 20 degrees"])
    assert scores == pytest.approx([0.1, 0.3, 0.0, 0.3])  # "rain" once; "it's" is one word


def test_detail_reward_ignores_case_and_grows_with_new_words():
    from grpo_core.rewards import detail_reward

    short, longer = "Spring is warm", "Spring is warm, wet and WARM with flowers"
    assert detail_reward([short.upper()]) == detail_reward([short])
    assert detail_reward([longer])[0] == pytest.approx(0.7)  # 7 words: "warm" counted once
    assert detail_reward([longer])[0] > detail_reward([short])[0]


def test_detail_reward_reads_conversations_and_ignores_columns():
    from grpo_core.rewards import detail_reward

    chat = [[{"role": "assistant", "content": "one two"}]]
    assert detail_reward(chat, prompts=["x"], task_id=[1]) == pytest.approx([0.2])
