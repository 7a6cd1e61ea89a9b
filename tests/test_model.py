"""The model and its masks: the cache protocol reproduces the plain causal forward.

Tolerances. Everything here runs in fp32 on the CPU. The cached paths compute the same
sums as the full forward but in a different order (keys concatenated step by step, SDPA
over a different number of keys, an explicit mask instead of is_causal), so results agree
to float rounding, not bit for bit. The toy model's logits are about 1 in size, so fp32
rounding (~6e-8 relative) through two layers stays near 1e-7; we allow 1e-5 absolute.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F

from tinyllm import GraphDecoder, SlotGraphDecoder, SlotKVCache, bucket_for
from tinyllm.generation import decode_step, left_pad, prefill
from tinyllm.kv_cache import KVCache, causal_kwargs, padded_causal_mask, slot_mask, window_mask
from tinyllm.model import apply_rope, widen

ATOL = 1e-5


@torch.no_grad()
def test_incremental_decode_matches_full_forward(toy_model):
    idx = torch.randint(0, 256, (3, 48))
    full, _ = toy_model(idx)
    cache = KVCache(toy_model.cfg.n_layers)
    parts = [prefill(toy_model, idx[:, :10], cache)]
    for t in range(10, 48):
        parts.append(decode_step(toy_model, cache, idx[:, t : t + 1]))
    inc = torch.cat(parts, dim=1)
    assert inc.shape == full.shape
    assert cache.n == 48 and cache.k[0].shape[2] == 48
    torch.testing.assert_close(inc, full, atol=ATOL, rtol=0)


@torch.no_grad()
def test_chunked_prefill_matches_full_forward(toy_model):
    """Chunks of T > 1 at an offset use causal_kwargs' explicit mask."""
    idx = torch.randint(0, 256, (2, 40))
    full, _ = toy_model(idx)
    cache = KVCache(toy_model.cfg.n_layers)
    parts = [prefill(toy_model, idx[:, a:b], cache) for a, b in ((0, 7), (7, 8), (8, 23), (23, 40))]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=ATOL, rtol=0)


@torch.no_grad()
def test_left_padded_rows_match_each_row_alone(toy_model):
    """Pads occupy positions but are never attended to; RoPE is relative, so a padded
    row's logits equal its unpadded forward up to rounding."""
    rows = [torch.randint(0, 256, (n,)).tolist() for n in (30, 12, 25, 1)]
    idx, pad_lens = left_pad(rows, pad_id=257)
    cache = KVCache(toy_model.cfg.n_layers, pad_lens)
    logits = prefill(toy_model, idx, cache)
    nxt = torch.randint(0, 256, (4, 1))
    step = decode_step(toy_model, cache, nxt)
    for b, row in enumerate(rows):
        alone, _ = toy_model(torch.tensor([row + [int(nxt[b])]]))
        torch.testing.assert_close(logits[b, int(pad_lens[b]) :], alone[0, :-1], atol=ATOL, rtol=0)
        torch.testing.assert_close(step[b, 0], alone[0, -1], atol=ATOL, rtol=0)


class _RowCache:
    """A minimal cache that places row b at positions offsets[b]..offsets[b]+T-1 and hands
    the model cos/sin per row (B, T, D/2), or shared (T, D/2) when every offset is equal
    and `shared` is set. No history: each call is a plain causal forward."""

    fused = False  # it stores keys with update() and hands SDPA attn_kwargs

    def __init__(self, offsets, shared=False):
        self.offsets, self.shared = offsets, shared
        self.attn_kwargs = {"is_causal": True}

    def begin_step(self, T, rope):
        if self.shared:
            assert len(set(self.offsets)) == 1
            return rope(T, self.offsets[0])
        cos = torch.stack([rope(T, o)[0] for o in self.offsets])
        sin = torch.stack([rope(T, o)[1] for o in self.offsets])
        return cos, sin

    def layer(self, i):
        return self

    def update(self, k, v):
        return k, v

    def end_step(self, T):
        pass


@torch.no_grad()
def test_per_row_rope_equals_shared_when_rows_are_equal(toy_model):
    idx = torch.randint(0, 256, (3, 17))
    D2 = toy_model.cfg.head_dim // 2
    for offset in (0, 5):
        cache = _RowCache([offset] * 3)
        cos, _ = cache.begin_step(17, toy_model.rope)
        assert cos.shape == (3, 17, D2)
        per_row, _ = toy_model(idx, cache=cache)
        shared, _ = toy_model(idx, cache=_RowCache([offset] * 3, shared=True))
        assert toy_model.rope(17, offset)[0].shape == (17, D2)
        torch.testing.assert_close(per_row, shared, atol=0, rtol=0)
    # offset 0 with shared tables is exactly the cache-less forward
    plain, _ = toy_model(idx)
    torch.testing.assert_close(
        toy_model(idx, cache=_RowCache([0] * 3, shared=True))[0], plain, atol=0, rtol=0
    )


@torch.no_grad()
def test_per_row_rope_places_each_row_at_its_own_position(toy_model):
    idx = torch.randint(0, 256, (3, 9))
    offsets = [0, 4, 31]
    per_row, _ = toy_model(idx, cache=_RowCache(offsets))
    for b, off in enumerate(offsets):
        alone, _ = toy_model(idx[b : b + 1], cache=_RowCache([off], shared=True))
        torch.testing.assert_close(per_row[b : b + 1], alone, atol=ATOL, rtol=0)
    # and apply_rope itself: a per-row table equals the row's own shared table
    x = torch.randn(3, 9, 4, toy_model.cfg.head_dim)  # (B, T, heads, D)
    cos, sin = widen(*_RowCache(offsets).begin_step(9, toy_model.rope))
    rotated = apply_rope(x, cos, sin)
    for b, off in enumerate(offsets):
        c, s = widen(*toy_model.rope(9, off))
        torch.testing.assert_close(
            rotated[b : b + 1], apply_rope(x[b : b + 1], c, s), atol=0, rtol=0
        )


def test_apply_rope_rotates_each_pair_by_its_angle(toy_model):
    """(x_j, x_{j+D/2}) as the complex number x_j + i x_{j+D/2}, times e^{i p θ_j}."""
    D, T, offset = toy_model.cfg.head_dim, 7, 11
    x = torch.randn(2, T, 3, D, dtype=torch.float64)
    cos, sin = toy_model.rope(T, offset)
    got = apply_rope(x, *widen(cos.double(), sin.double()))
    z = torch.complex(x[..., : D // 2], x[..., D // 2 :])
    want = z * torch.complex(cos.double(), sin.double())[:, None, :]  # over the heads
    torch.testing.assert_close(got, torch.cat([want.real, want.imag], dim=-1))
    assert not torch.allclose(got, x)  # it does rotate


def brute_padded_mask(offset, T, first_valid):
    """The rule, one entry at a time: a real query attends to the real keys at or before
    it; a pad query (position < first_valid) attends to itself alone."""
    B = len(first_valid)
    mask = torch.zeros(B, 1, T, offset + T, dtype=torch.bool)
    for b, i, k in itertools.product(range(B), range(T), range(offset + T)):
        q = offset + i
        if q < first_valid[b]:
            mask[b, 0, i, k] = k == q
        else:
            mask[b, 0, i, k] = first_valid[b] <= k <= q
    return mask


def test_padded_causal_mask_matches_brute_force():
    gen = torch.Generator().manual_seed(0)
    for _ in range(60):
        B = int(torch.randint(1, 5, (1,), generator=gen))
        T = int(torch.randint(1, 9, (1,), generator=gen))
        offset = int(torch.randint(0, 9, (1,), generator=gen))
        # pads may cover part of the prompt, all of it but the last token, or (in a chunked
        # prefill) reach past this chunk's queries
        first_valid = torch.randint(0, offset + T + 1, (B,), generator=gen)
        mask = padded_causal_mask(offset, T, first_valid)
        assert mask.dtype == torch.bool and mask.shape == (B, 1, T, offset + T)
        assert torch.equal(mask, brute_padded_mask(offset, T, first_valid.tolist())), (
            offset,
            T,
            first_valid,
        )
        assert mask.any(dim=-1).all(), "a fully masked row: what SDPA returns depends on the kernel"


def dense_mask(kwargs, offset, T):
    """causal_kwargs' SDPA arguments as an explicit (T, offset+T) may-attend mask."""
    S = offset + T
    if not kwargs:
        return torch.ones(T, S, dtype=torch.bool)
    if kwargs.get("is_causal"):
        assert set(kwargs) == {"is_causal"}
        # SDPA's is_causal aligns the mask top-left: only right when T == S
        assert T == S
        return torch.ones(T, S, dtype=torch.bool).tril()
    assert set(kwargs) == {"attn_mask"}
    return kwargs["attn_mask"]


def test_causal_kwargs_matches_brute_force():
    for offset, T in itertools.product(range(7), range(1, 8)):
        kwargs = causal_kwargs(offset, T, "cpu")
        brute = torch.tensor([[k <= offset + i for k in range(offset + T)] for i in range(T)])
        mask = dense_mask(kwargs, offset, T)
        assert mask.shape == (T, offset + T)
        assert torch.equal(mask, brute), (offset, T, kwargs)
        assert mask.any(dim=-1).all()


def test_causal_kwargs_give_sdpa_the_brute_force_result():
    for offset, T in ((0, 1), (0, 6), (5, 1), (5, 4)):
        q = torch.randn(2, 2, T, 8)
        k, v = torch.randn(2, 2, offset + T, 8), torch.randn(2, 2, offset + T, 8)
        brute = torch.tensor([[k_ <= offset + i for k_ in range(offset + T)] for i in range(T)])
        got = F.scaled_dot_product_attention(q, k, v, **causal_kwargs(offset, T, "cpu"))
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=brute)
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def decode_mask(cache, H_kv, window):
    """The attn_mask of a decode step over window keys as booleans, one row per batch row
    (the cache keeps one per K/V head, all equal)."""
    mask = cache.decode_bias(window)[:, 0, 0] == 0  # additive: 0 = attend
    rows = mask.view(-1, H_kv, mask.shape[-1])
    assert (rows == rows[:, :1]).all()
    return rows[:, 0]


def test_the_static_decode_mask_is_window_mask_at_every_step(toy_model):
    """The cache keeps the mask as device state, one key opened per step: at every step it
    equals window_mask (pad keys and keys past the position masked), across windows, and
    no row is ever empty."""
    pads = [0, 5, 19]
    idx = torch.randint(0, 256, (3, 20))
    dec = GraphDecoder(toy_model, 3, max_len=64, buckets=(24, 32, 64), use_graph=False)
    dec.prefill(idx, torch.tensor(pads))
    tok = idx[:, -1:]
    for _ in range(30):  # positions 20..49, windows 24, 32 and 64
        pos, window = dec.cache.n, dec.graph_key()
        logits = dec.step(tok)
        mask = decode_mask(dec.cache, toy_model.cfg.n_kv_heads, window)
        assert mask.shape == (3, bucket_for(pos + 1, dec.buckets))
        assert torch.equal(mask, window_mask(pos, mask.shape[1], pads)), pos
        assert mask.any(dim=-1).all()
        tok = logits[:, -1].argmax(-1, keepdim=True)


def test_the_slot_decode_mask_is_slot_mask_at_every_step(toy_model):
    slots = SlotKVCache(toy_model.cfg.n_layers, 4, 64, "cpu")
    dec = SlotGraphDecoder(toy_model, slots, buckets=(32, 64), use_graph=False)
    for slot, T in ((1, 5), (3, 9)):  # slots 0 and 2 stay free
        prefill(toy_model, torch.randint(0, 256, (1, T)), slots.prefilling(slot))
    for step in range(30):
        if step == 10:  # a slot leaves: its row is free again (key 0 alone)
            slots.release(3)
        lens, window = slots.lens_dev.clone(), dec.graph_key()
        dec.step(torch.randint(0, 256, (4, 1)))
        mask = decode_mask(slots, toy_model.cfg.n_kv_heads, window)
        assert torch.equal(mask, slot_mask(lens, mask.shape[1])), step
        assert mask.any(dim=-1).all()
    assert slots.lens == [0, 35, 0, 0]


@pytest.mark.parametrize("shape", [(12,), (2, 3, 4)])
def test_forward_rejects_a_non_2d_idx(toy_model, shape):
    with pytest.raises(ValueError, match=r"idx must be \(B, T\), got shape"):
        toy_model(torch.zeros(shape, dtype=torch.long))


def test_rope_rejects_positions_past_its_table(toy_model):
    n = toy_model.cfg.max_seq_len
    toy_model.rope(4, n - 4)
    with pytest.raises(ValueError, match=rf"position {n + 1} > max_seq_len {n}"):
        toy_model.rope(5, n - 4)
