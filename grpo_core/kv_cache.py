"""A key/value cache with room reserved for the tokens still to come (notebook 04, section 6).

Hugging Face's ``DynamicCache`` grows by concatenation: every decoding step copies each
layer's whole key and value tensors into a new, one position longer, allocation: at 16 rows
and about a hundred positions, 60 copies of a megabyte or more per step. ``torch.profiler``
put ``aten::cat`` at 2.4 s of 12.9 s over a 64-token rollout of SmolLM2-135M in float32 (a
2-core AMD EPYC with AVX2 only); the wall clock gained less, about 3 % of a decoding step
(docs/performance.md), because the matrix products are most of it.

:class:`ReservedLayer` keeps each layer's keys and values in a buffer with room for
``reserve`` more positions and writes every new token into that room: the tensors the model
reads are views of the buffer's filled part, holding exactly the numbers ``DynamicLayer``
would hold, so attention computes the same outputs. What it leaves out: a sliding-window
layer (none of the course's models has one) keeps its own class and grows as before.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from transformers.cache_utils import DynamicCache, DynamicLayer

POSITIONS = 2  # the axis of a layer's [B, H, S, D] keys and values that counts positions


class ReservedLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``[B, H, S, D]`` keys and values are views of ``[B, H, S + room, D]`` buffers.

    ``update`` writes the new positions into the room and returns views one write longer. Any
    inherited method that replaces ``keys``/``values`` (``batch_select_indices`` when a row
    ends, ``crop``, ``reset``, ...) leaves tensors that are not views of the buffers; the next
    ``update`` sees that and reserves fresh buffers around them, so every inherited method stays
    correct.
    """

    def __init__(self, reserve: int) -> None:
        if reserve < 0:
            raise ValueError(f"reserve must be >= 0, got {reserve}")
        super().__init__()
        self.reserve = reserve
        # the two buffers, and the keys view update last returned (are the keys still ours?)
        self._key_room = self._value_room = self._keys_view = None
        self._width: int | None = None  # the buffers' positions

    def _reserve_room(self, filled: int, key_states: Tensor, value_states: Tensor) -> None:
        """New buffers holding the ``filled`` cached positions and the incoming
        ``[B, H, n, D]`` states. Their width is fixed by the first call (the prompt's positions
        plus ``reserve``), so rows leaving the batch never make the room larger; only a call
        that would overflow it widens it, by ``reserve`` positions more."""
        needed = filled + key_states.size(POSITIONS)
        if self._width is None or needed > self._width:
            self._width = needed + self.reserve
        rooms = []
        for cached, incoming in ((self.keys, key_states), (self.values, value_states)):
            batch, heads, _, dim = incoming.shape
            room = incoming.new_empty((batch, heads, self._width, dim))
            if filled:
                room[:, :, :filled] = cached
            rooms.append(room)
        self._key_room, self._value_room = rooms

    def update(self, key_states: Tensor, value_states: Tensor, *args: Any,
               **kwargs: Any) -> tuple[Tensor, Tensor]:
        """Write ``[B, H, n, D]`` new keys and values after the cached ones; return all of them."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        filled = self.keys.size(POSITIONS) if self.keys.dim() == 4 else 0
        new = key_states.size(POSITIONS)
        if self.keys is not self._keys_view or filled + new > self._key_room.size(POSITIONS):
            self._reserve_room(filled, key_states, value_states)
        self._key_room[:, :, filled:filled + new] = key_states
        self._value_room[:, :, filled:filled + new] = value_states
        self.keys = self._keys_view = self._key_room[:, :, :filled + new]
        self.values = self._value_room[:, :, :filled + new]
        return self.keys, self.values

    def reset(self) -> None:
        self._key_room = self._value_room = self._keys_view = self._width = None
        super().reset()


def reserved_cache(config: Any, reserve: int) -> DynamicCache:
    """A ``DynamicCache`` for ``config``'s model whose full-attention layers are
    :class:`ReservedLayer` with room for ``reserve`` positions beyond the prompt."""
    cache = DynamicCache(config=config)
    cache.layers = [ReservedLayer(reserve) if type(layer) is DynamicLayer else layer
                    for layer in cache.layers]
    return cache

