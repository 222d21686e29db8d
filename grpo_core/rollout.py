"""Rollouts: the policy's own attempts, sampled as groups (lecture: "RL in three functions").

One batched decoding loop (:func:`decode_until`) samples ``group_size`` completions for each prompt.
The batch is laid out group after group, ``[p0 x k, p1 x k, ...]``, which is the layout
``group_advantages`` expects.

Why a loop of our own rather than ``model.generate``: it is the same algorithm (one forward
pass over the prompts, then one token per forward pass with the key/value cache), short
enough to read, and it draws each token by inverting the cumulative distribution with one
uniform number per row (:func:`sample_next_token`). ``generate``'s ``torch.multinomial``
draws one exponential number per vocabulary entry instead: about 30 ms per token for 16 rows
of SmolLM2's 49,152-token vocabulary on a laptop CPU, a fifth of a decoding step
(docs/performance.md, "Where the time goes"). Both sample exactly from ``softmax(logits / temperature)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from grpo_core.logprobs import completion_mask, distinct_prompts, token_logprobs
from grpo_core.packed_decoder import DecodeCache, PackedDecoder, can_decode
from grpo_core.profiles import Profile

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass
class Rollout:
    """A batch of sampled completions, ``B = len(prompts) * group_size`` rows.

    Attributes:
        prompt_ids: ``[B, P]`` left-padded prompt token ids.
        prompt_mask: ``[B, P]`` 1 for real prompt tokens, 0 for padding.
        completion_ids: ``[B, C]`` sampled token ids, right-padded after the first EOS.
        completion_mask: ``[B, C]`` 1 up to and including the first EOS (or the token that
            met the stop rule), else 0.
        texts: ``B`` decoded completions (special tokens removed).
        truncated: ``[B]`` bool, True where the completion hit ``max_new_tokens`` without EOS
            (and without meeting the rollout's stop rule, when it has one).
        prompts: ``B`` prompt strings, each repeated ``group_size`` times.
        group_size: completions per prompt (k).
    """

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor
    texts: list[str]
    truncated: Tensor
    prompts: list[str]
    group_size: int

    @property
    def lengths(self) -> Tensor:
        """``[B]`` completion lengths in tokens (EOS included)."""
        return self.completion_mask.sum(dim=1)

    @property
    def input_ids(self) -> Tensor:
        """``[B, P + C]`` each prompt followed by its completion: what a log-prob pass reads
        (``grpo_core.logprobs.token_logprobs`` scores the last ``C`` positions)."""
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> Tensor:
        """``[B, P + C]`` the prompt's padding mask followed by the completion's mask."""
        return torch.cat([self.prompt_mask, self.completion_mask], dim=1)


def chat_prompt(
    tokenizer: PreTrainedTokenizerBase,
    user_message: str,
    *,
    system_message: str | None = None,
    enable_thinking: bool = False,
) -> str:
    """Wrap ``user_message`` in the model's chat template, ready for the assistant's reply.

    ``enable_thinking=False`` turns Qwen3's thinking block off; templates without that
    switch ignore it.
    """
    messages = [{"role": "user", "content": user_message}]
    if system_message is not None:
        messages.insert(0, {"role": "system", "content": system_message})
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking
    )


def _eos_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured is not None:
        ids.update(configured)
    return sorted(i for i in ids if i is not None)


# a whole fenced block: an opening fence with an optional label, a line break, the code, and
# a closing fence at the start of a line
_CLOSED_FENCE = re.compile(r"```[^\n`]*\n.*?\n```", re.DOTALL)


def code_block_closed(text: str) -> bool:
    """True once ``text`` holds a whole fenced code block (```` ```python ````, the code, then
    ```` ``` ```` on a line of its own).

    The code experiments' stop rule (``TrainConfig.stop_at="code_block"``): their rewards read
    the first such block (``grpo_core.rewards.extract_code``), so whatever the model would
    write after it is never scored; sampling it only costs time and budget, and a long tail of
    prose after the code would make the completion run into ``max_new_tokens`` and count as
    truncated although its code was complete. vLLM's ``stop`` strings and ``generate``'s
    ``stop_strings`` end a completion the same way.
    """
    return _CLOSED_FENCE.search(text) is not None


@dataclass(frozen=True)
class StopRule:
    """When a completion is over before its EOS.

    Attributes:
        done: ``text -> bool``, True once the completion so far is complete.
        trigger: a character the last token must contain for ``done`` to become True (a cheap
            filter: the text is decoded only after such a token).
    """

    done: Callable[[str], bool]
    trigger: str


STOP_RULES: dict[str, StopRule] = {"code_block": StopRule(code_block_closed, trigger="`")}


def stop_rule(name: str) -> StopRule:
    """The rule ``name`` of :data:`STOP_RULES`."""
    if name not in STOP_RULES:
        raise ValueError(f"unknown stop rule {name!r}: choose one of {', '.join(STOP_RULES)}")
    return STOP_RULES[name]


def _trigger_ids(tokenizer: PreTrainedTokenizerBase, trigger: str) -> list[int]:
    """The ids of every token whose text contains ``trigger``."""
    vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return [i for i, token in enumerate(vocabulary) if token is not None and trigger in token]


def stop_check(tokenizer: PreTrainedTokenizerBase, rule: StopRule
               ) -> Callable[[Tensor, Tensor], Tensor]:
    """``check(new_ids [B, t], active [B]) -> [B] bool``: the active rows whose completion so
    far meets ``rule`` (decoded only after a token that holds its trigger)."""
    triggers = torch.tensor(_trigger_ids(tokenizer, rule.trigger), dtype=torch.long)

    def check(new_ids: Tensor, active: Tensor) -> Tensor:
        done = torch.zeros_like(active)
        candidates = active & torch.isin(new_ids[:, -1], triggers.to(new_ids.device))
        for row in candidates.nonzero().flatten().tolist():
            text = tokenizer.decode(new_ids[row], skip_special_tokens=True)
            done[row] = rule.done(text)
        return done

    return check


def sample_next_token(logits: Tensor, temperature: float = 1.0, top_p: float = 1.0) -> Tensor:
    """Draw one token per row from ``softmax(logits / temperature)``, kept to the top-p nucleus.

    Inverse-CDF sampling: one uniform number ``u`` per row, and the token whose cumulative
    probability first exceeds ``u`` (``torch.searchsorted``).

    Args:
        logits: ``[B, V]`` next-token logits.
        temperature: > 0; the distribution is ``softmax(logits / temperature)``.
        top_p: keep the smallest set of most likely tokens whose probability reaches ``top_p``
            (1.0 keeps every token).

    Returns:
        ``[B]`` token ids.
    """
    scaled = logits.float()
    if temperature != 1.0:  # at 1 the division changes nothing: skip a pass over [B, V]
        scaled = scaled / temperature
    probs = torch.softmax(scaled, dim=-1)
    order = None
    if top_p < 1.0:
        probs, order = probs.sort(dim=-1, descending=True)
        before = probs.cumsum(dim=-1) - probs  # probability of the more likely tokens
        probs = probs.masked_fill(before >= top_p, 0.0)  # the most likely token always stays
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(cdf.size(0), 1, device=cdf.device, dtype=cdf.dtype) * cdf[:, -1:]
    index = torch.searchsorted(cdf, u, right=True).clamp_(max=cdf.size(1) - 1)
    if order is not None:
        index = order.gather(1, index)
    return index.squeeze(1)


def _positions(attention_mask: Tensor) -> Tensor:
    """Position ids that skip the left padding (``generate``'s rule)."""
    return (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)


def decode_until(
    model: PreTrainedModel,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    max_new_tokens: int,
    eos_token_ids: list[int],
    pad_token_id: int,
    next_token: Callable[[Tensor], Tensor],
    stop: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """Extend each row of a left-padded batch by up to ``max_new_tokens`` tokens.

    One forward pass over the prompts fills the key/value cache; then each step feeds only
    the last token and asks for the last position's logits. A row that has produced an EOS
    gets ``pad_token_id`` from then on, and so does a row that ``stop`` says is complete; the
    loop stops early once every row has ended.

    Args:
        input_ids, attention_mask: ``[B, P]`` left-padded prompts.
        next_token: ``[B, V]`` logits -> ``[B]`` token ids (:func:`sample_next_token`, or
            ``argmax`` for greedy decoding).
        stop: ``(new_ids [B, t], active [B]) -> [B] bool`` after each step (:func:`stop_check`):
            an active row it marks ends with that step's token, which it keeps; later
            positions get ``pad_token_id``. None: EOS and the budget only.

    Returns:
        ``([B, C] new token ids, [B] stopped_at)``: ``stopped_at[i]`` is the number of tokens
        of row ``i`` when ``stop`` ended it (its last token included), else 0.
    """
    with torch.inference_mode():  # no autograd bookkeeping at all: less work per operation
        new_ids, stopped_at = _decode(model, input_ids, attention_mask, max_new_tokens,
                                      eos_token_ids, pad_token_id, next_token, stop)
    # normal tensors again, usable as the input of a training pass
    return new_ids.clone(), stopped_at.clone()


class _ModelSteps:
    """Decoding steps through the model's own forward, on a cache with reserved room."""

    def __init__(self, model: PreTrainedModel, cache: Any, attention_mask: Tensor) -> None:
        self.model, self.cache, self.attention_mask = model, cache, attention_mask

    def keep_rows(self, rows: Tensor) -> None:
        self.cache.batch_select_indices(rows)
        self.attention_mask = self.attention_mask[rows]

    def __call__(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """``[B]`` tokens at ``[B]`` positions -> ``[B, V]`` next-token logits."""
        self.attention_mask = torch.cat(
            [self.attention_mask, self.attention_mask.new_ones(tokens.size(0), 1)], dim=1)
        return self.model(input_ids=tokens[:, None], attention_mask=self.attention_mask,
                          position_ids=positions[:, None], cache=self.cache, use_cache=True,
                          logits_to_keep=1).logits[:, -1]


class _PackedSteps:
    """Decoding steps written out for a packed Llama sampling copy
    (:class:`grpo_core.packed_decoder.PackedDecoder`)."""

    def __init__(self, model: PreTrainedModel, cache: Any, attention_mask: Tensor,
                 reserve: int) -> None:
        self.decoder = PackedDecoder(model)
        self.cache = DecodeCache.from_layers([(layer.keys, layer.values) for layer in cache.layers],
                                             attention_mask, reserve)

    def keep_rows(self, rows: Tensor) -> None:
        self.cache.keep_rows(rows)

    def __call__(self, tokens: Tensor, positions: Tensor) -> Tensor:
        return self.decoder.step(tokens, positions, self.cache)


def _decode(model, input_ids, attention_mask, max_new_tokens, eos_token_ids, pad_token_id,
            next_token, stop=None) -> tuple[Tensor, Tensor]:
    """The loop itself, with savings that leave every row's logits as they were (up to float
    rounding):

    - **one prompt pass per distinct prompt**: a group's ``k`` rows hold the same prompt, so
      the prompt pass runs on the distinct rows only and its cache is copied ``k`` times (a
      sixteenth of the rows at 2 prompts x 8: the pass over the prompts went from about a
      tenth of a rollout to almost nothing);
    - **finished rows leave the batch**: a row that has ended (EOS or the stop rule) is
      dropped from the key/value cache and from every later forward pass. On a CPU a decoding
      step's matrix products cost about in proportion to the rows (float32 at 16 rows is
      compute-bound, not memory-bound), so a group whose completions end early no longer pays
      for its longest one on every row;
    - **a decoding step written out** for a packed float32 or bfloat16 Llama sampling copy
      (:mod:`grpo_core.packed_decoder`, where :func:`~grpo_core.packed_decoder.can_decode`
      says so): the same products with fewer operations around them; any other model decodes
      through its own forward.

    ``next_token`` still gets ``[B, V]`` logits for every row (an ended row keeps its last
    ones, and its token is replaced by ``pad_token_id`` as before), so it draws the same random
    numbers as a loop that keeps every row: the same seed gives the same samples.

    The key/value cache reserves room for ``max_new_tokens`` positions after the prompt
    (:func:`grpo_core.kv_cache.reserved_cache`, or the written-out step's own buffers): each
    step writes its token's keys and values in place instead of copying the whole cache into a
    longer tensor.
    """
    from grpo_core.kv_cache import reserved_cache  # transformers: only once a model decodes

    device = input_ids.device
    rows = input_ids.size(0)
    written_out = can_decode(model)
    # the written-out step decodes from buffers of its own: the prompt pass needs no room
    cache = reserved_cache(model.config, 0 if written_out else max_new_tokens)
    eos = torch.tensor(eos_token_ids, device=device)
    finished = torch.zeros(rows, dtype=torch.bool, device=device)
    stopped_at = torch.zeros(rows, dtype=torch.long, device=device)
    unique_ids, unique_mask, copy_of = distinct_prompts(input_ids, attention_mask)
    width = input_ids.size(1)
    last = torch.tensor([width - 1], device=device)  # an index: see scored_positions
    logits = model(input_ids=unique_ids, attention_mask=unique_mask,
                   position_ids=_positions(unique_mask), cache=cache, use_cache=True,
                   logits_to_keep=last).logits[:, -1]
    if unique_ids.size(0) < rows:
        cache.batch_select_indices(copy_of)
    if written_out:
        steps = _PackedSteps(model, cache, attention_mask, max_new_tokens)
    else:
        steps = _ModelSteps(model, cache, attention_mask)
    all_logits = logits[copy_of]  # [B, V]: every row's latest logits, ended rows' included
    alive = torch.arange(rows, device=device)  # the original rows still in the batch
    positions = _positions(attention_mask)[:, -1]
    tokens: list[Tensor] = []
    for _ in range(max_new_tokens):
        token = next_token(all_logits).masked_fill(finished, pad_token_id)
        tokens.append(token)
        active = ~finished
        finished |= torch.isin(token, eos)
        if stop is not None:
            complete = stop(torch.stack(tokens, dim=1), active & ~finished)
            stopped_at[complete] = len(tokens)
            finished |= complete
        if len(tokens) == max_new_tokens or finished.all():
            break
        keep = ~finished[alive]
        if not keep.all():  # some rows ended: drop them from the cache and the batch
            kept = keep.nonzero().flatten()
            steps.keep_rows(kept)
            alive, positions = alive[kept], positions[kept]
        positions = positions + 1
        all_logits[alive] = steps(token[alive], positions)
    return torch.stack(tokens, dim=1), stopped_at


@torch.no_grad()
def sample_group(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: str | list[str],
    group_size: int,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop_at: str | None = None,
) -> Rollout:
    """Sample ``group_size`` completions for each prompt in one batched :func:`decode_until` loop.

    Args:
        prompts: one prompt or a list, already formatted (see :func:`chat_prompt`).
        group_size: completions per prompt, k >= 1.
        max_new_tokens: the completion budget; longer completions are cut and flagged
            ``truncated``.
        seed: seeds torch's generator first, so the same call gives the same samples.
        stop_at: a :data:`STOP_RULES` name (``"code_block"``): a completion also ends with
            the token that meets the rule, is not truncated, and nothing after it is sampled
            or scored. None: EOS and the budget only.

    Returns:
        A :class:`Rollout` with ``B = len(prompts) * group_size`` rows, group after group.
    """
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    if not prompts:
        raise ValueError("sample_group needs at least one prompt")
    if group_size < 1 or max_new_tokens < 1:
        raise ValueError(
            f"group_size and max_new_tokens must be >= 1, got {group_size} and {max_new_tokens}"
        )
    if not temperature > 0 or not 0 < top_p <= 1:
        raise ValueError(f"temperature must be > 0 and top_p in (0, 1], got {temperature} and {top_p}")
    if tokenizer.padding_side != "left":
        raise ValueError("batched generation needs tokenizer.padding_side == 'left'")
    stop = None if stop_at is None else stop_check(tokenizer, stop_rule(stop_at))
    repeated = [p for p in prompts for _ in range(group_size)]
    encoded = tokenizer(repeated, return_tensors="pt", padding=True, add_special_tokens=False)
    encoded = encoded.to(model.device)
    if seed is not None:
        torch.manual_seed(seed)
    eos_ids = _eos_token_ids(model, tokenizer)
    was_training = model.training
    model.eval()  # no dropout while sampling
    try:
        completion_ids, stopped_at = decode_until(
            model, encoded["input_ids"], encoded["attention_mask"],
            max_new_tokens=max_new_tokens, eos_token_ids=eos_ids,
            pad_token_id=tokenizer.pad_token_id,
            next_token=lambda logits: sample_next_token(logits, temperature, top_p), stop=stop,
        )
    finally:
        model.train(was_training)
    mask = completion_mask(completion_ids, eos_ids).to(torch.long)
    stopped = stopped_at > 0
    positions = torch.arange(completion_ids.size(1), device=completion_ids.device)
    # a stopped row has no EOS: its padding must not count, even where pad is an EOS id
    mask = mask.masked_fill(stopped[:, None] & (positions >= stopped_at[:, None]), 0)
    has_eos = torch.isin(completion_ids, torch.tensor(eos_ids, device=completion_ids.device))
    truncated = ~(has_eos.any(dim=1) | stopped)
    completion_ids = completion_ids.masked_fill(mask == 0, tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    return Rollout(
        prompt_ids=encoded["input_ids"],
        prompt_mask=encoded["attention_mask"],
        completion_ids=completion_ids,
        completion_mask=mask,
        texts=texts,
        truncated=truncated,
        prompts=repeated,
        group_size=group_size,
    )


def take_groups(parts: list[tuple[Rollout, int]], pad_token_id: int) -> Rollout:
    """One :class:`Rollout` of the groups ``[(rollout, group index), ...]``, in that order:
    how dynamic sampling puts a batch together from groups sampled in different rounds.

    Groups from rollouts of different widths are padded to the widest: prompts on the left
    (mask 0), completions on the right (``pad_token_id``, mask 0), as :func:`sample_group`
    pads them. Every part must have the same ``group_size``.
    """
    if not parts:
        raise ValueError("take_groups needs at least one group")
    k = parts[0][0].group_size
    if any(rollout.group_size != k for rollout, _ in parts):
        raise ValueError("every group must come from rollouts of the same group_size")
    prompt_width = max(rollout.prompt_ids.size(1) for rollout, _ in parts)
    completion_width = max(rollout.completion_ids.size(1) for rollout, _ in parts)
    fields: dict[str, list] = {name: [] for name in ("prompt_ids", "prompt_mask", "completion_ids",
                                                     "completion_mask", "truncated")}
    texts, prompts = [], []
    for rollout, group in parts:
        if not 0 <= group < len(rollout.texts) // k:
            raise ValueError(f"group {group} is not in a rollout of {len(rollout.texts) // k}")
        rows = slice(group * k, (group + 1) * k)
        left = prompt_width - rollout.prompt_ids.size(1)
        right = completion_width - rollout.completion_ids.size(1)
        fields["prompt_ids"].append(torch.nn.functional.pad(rollout.prompt_ids[rows], (left, 0),
                                                            value=pad_token_id))
        fields["prompt_mask"].append(torch.nn.functional.pad(rollout.prompt_mask[rows], (left, 0)))
        fields["completion_ids"].append(torch.nn.functional.pad(
            rollout.completion_ids[rows], (0, right), value=pad_token_id))
        fields["completion_mask"].append(torch.nn.functional.pad(rollout.completion_mask[rows],
                                                                 (0, right)))
        fields["truncated"].append(rollout.truncated[rows])
        texts.extend(rollout.texts[rows])
        prompts.extend(rollout.prompts[rows])
    return Rollout(**{name: torch.cat(values) for name, values in fields.items()}, texts=texts,
                   prompts=prompts, group_size=k)


def sample_for_profile(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: str | list[str],
    profile: Profile,
    group_size: int | None = None,
    seed: int | None = None,
) -> Rollout:
    """:func:`sample_group` with the profile's group size, length budget and sampling settings."""
    return sample_group(
        model,
        tokenizer,
        prompts,
        group_size or profile.group_size,
        max_new_tokens=profile.max_new_tokens,
        temperature=profile.temperature,
        top_p=profile.top_p,
        seed=profile.seed if seed is None else seed,
    )


def completion_logprobs(model: PreTrainedModel, rollout: Rollout,
                        temperature: float = 1.0) -> Tensor:
    """``[B, C]`` per-token log-probs of ``rollout``'s completions under ``model`` as it is
    now, without gradient (``grpo_core.logprobs.token_logprobs`` on prompt + completion): how
    a step changed what the model thinks of the same completions (notebook 02). Training
    calls ``token_logprobs`` itself, with gradient."""
    with torch.no_grad():
        return token_logprobs(model, rollout.input_ids, rollout.attention_mask,
                              rollout.completion_ids.size(1), temperature=temperature)
