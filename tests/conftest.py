"""Shared fixtures: the smoke-profile policy is loaded once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _process_local_tqdm_lock() -> None:
    """tqdm's default lock is shared between processes: a forked test process killed while it
    held it (make mutate's time limit) would block every later one. Tests need a local one."""
    import threading

    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


_process_local_tqdm_lock()
if str(REPO_ROOT) not in sys.path:  # for `import tools.notebooks`
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(autouse=True)
def _empty_memo_caches():
    """Each test starts with grpo_core's memo caches (``functools.lru_cache``) empty: no test
    sees a result that another test computed (nor, under ``make mutate``, one that the
    original code computed before the mutant was switched on)."""
    for name, module in list(sys.modules.items()):
        if name == "grpo_core" or name.startswith("grpo_core."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and hasattr(value, "cache_info"):
                    value.cache_clear()
    yield


@pytest.fixture(scope="session")
def smoke_profile():
    from grpo_core.profiles import get_profile

    return get_profile("smoke")


@pytest.fixture(scope="session")
def smoke_policy(smoke_profile):
    """``(model, tokenizer)`` of the offline model; converts it on the first run (~30 s)."""
    from grpo_core.models import load_policy

    return load_policy(smoke_profile)


TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}{% if enable_thinking %}<think>{% endif %}"
)


def make_tiny_policy(seed: int = 0, hidden_size: int = 16, layers: int = 1):
    """``(model, tokenizer)``: a random one-layer Llama over a character tokenizer (~40 ids).

    No file and no download: the loop's mechanics in milliseconds per step. The same seed
    gives the same weights.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "?": 2}
    for char in "abcdefghijklmnopqrstuvwxyzSDN .,<>":
        vocab.setdefault(char, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="?"))
    backend.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>",
                                        eos_token="<eos>", padding_side="left")
    tokenizer.chat_template = TINY_CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=128, tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=vocab["<eos>"], pad_token_id=vocab["<pad>"],
    )
    return LlamaForCausalLM(config).eval(), tokenizer


@pytest.fixture
def tiny_policy():
    """A fresh :func:`make_tiny_policy` (seed 0) for each test."""
    return make_tiny_policy()


@pytest.fixture
def new_tiny_policy():
    """:func:`make_tiny_policy` itself, for tests that need several identical policies."""
    return make_tiny_policy


QWEN3_TEMPLATE = (  # the generation-prompt branch of Qwen3's own chat template
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is "
    "false %}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory):
    """A 2-layer Qwen3 with random weights and Qwen3's chat template, saved in bfloat16 like
    Qwen3-0.6B on the Hub, so ``load_policy`` takes the gpu profile's path
    (``local_files_only``): tests/test_hardware.py and tests/test_precision.py."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from grpo_core.models import ensure_offline_model

    folder = tmp_path_factory.mktemp("tiny-qwen3")
    tokenizer = AutoTokenizer.from_pretrained(ensure_offline_model())
    tokenizer.chat_template = QWEN3_TEMPLATE
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
    Qwen3ForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
