"""graphattn's CPU dropout: the masks' statistics, scaling, gradients and fallbacks."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import graphattn.ops.dropout as dropout_module
from graphattn.models.molecule import MoleculeModel, MoleculeModelConfig
from graphattn.nn.dropout import Dropout
from graphattn.ops.compiled import numba_available
from graphattn.ops.dropout import dropout, keep_mask

N = 1 << 20  # elements per statistical check: binomial std of a fraction <= 5e-4


@pytest.fixture(autouse=True, params=["numba", "torch"])
def mask_generator(request, monkeypatch) -> str:
    """Every test runs with both mask generators: Numba's counter-based one, and the
    torch one that runs where Numba is missing."""
    if request.param == "numba" and not numba_available():
        pytest.skip("Numba is not installed")
    if request.param == "torch":
        monkeypatch.setattr(dropout_module, "numba_available", lambda: False)
    return request.param


def within(observed: float, expected: float, trials: int, sigmas: float = 6.0) -> bool:
    """``observed`` frequency within ``sigmas`` binomial standard deviations of ``expected``."""
    return abs(observed - expected) <= sigmas * math.sqrt(expected * (1 - expected) / trials)


@pytest.mark.parametrize("p", [0.05, 0.1, 0.5, 0.9])
def test_drop_fraction_and_scale(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(N) + 1.0  # never zero, so a zero output means dropped
    out = dropout(x, p)
    dropped = out == 0
    assert within(dropped.float().mean().item(), p, N)
    p_rounded = round(p * 2**16) / 2**16
    torch.testing.assert_close(out[~dropped], x[~dropped] / (1 - p_rounded))


def test_neighbouring_elements_are_independent() -> None:
    """Four uniforms come from one 64-bit draw: pairs inside and across draws must be
    dropped together with probability p**2, not p."""
    torch.manual_seed(1)
    p = 0.3
    dropped = dropout(torch.ones(N), p) == 0
    for lag in (1, 2, 3, 4, 5):
        both = (dropped[:-lag] & dropped[lag:]).float().mean().item()
        assert within(both, p * p, N - lag), lag


def test_rows_and_columns_are_unbiased() -> None:
    """No position in a row (e.g. the lane of a 16-bit uniform in its word) is favoured."""
    torch.manual_seed(2)
    rows, cols, p = 1 << 14, 64, 0.25
    dropped = (dropout(torch.ones(rows, cols), p) == 0).float()
    for fraction in dropped.mean(0).tolist():
        assert within(fraction, p, rows)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 5), (0, 4)])
def test_any_shape_and_seeded(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape)
    torch.manual_seed(3)
    first = dropout(x, 0.5)
    torch.manual_seed(3)
    again = dropout(x, 0.5)
    assert first.shape == x.shape
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    if x.numel() >= 10:
        assert not torch.equal(dropout(x, 0.5), first)  # the generator moved on


def test_non_contiguous_input() -> None:
    x = torch.randn(64, 32).t()
    torch.manual_seed(4)
    out = dropout(x, 0.5)
    kept = out != 0
    torch.testing.assert_close(out[kept], 2 * x[kept])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtype_is_kept(dtype: torch.dtype) -> None:
    x = torch.ones(1000, dtype=dtype)
    out = dropout(x, 0.5)
    assert out.dtype == dtype
    assert set(out.unique().tolist()) <= {0.0, 2.0}


def test_gradient_is_the_mask() -> None:
    torch.manual_seed(5)
    x = torch.randn(4096, dtype=torch.float64, requires_grad=True)
    out = dropout(x, 0.2)
    out.sum().backward()
    scale = 1 / (1 - round(0.2 * 2**16) / 2**16)
    expected = torch.where(out == 0, 0.0, scale).to(x.dtype)
    torch.testing.assert_close(x.grad, expected)


def test_identity_and_fallbacks() -> None:
    x = torch.randn(100)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    assert torch.count_nonzero(dropout(x, 1.0)) == 0  # F.dropout's all-zero output
    ints = torch.arange(10)
    with pytest.raises(RuntimeError):  # F.dropout's own error for integer tensors
        dropout(ints, 0.5)
    with pytest.raises(ValueError, match="dropout probability must be in"):
        dropout(x, 1.5)
    with pytest.raises(ValueError, match="use F.dropout"):
        keep_mask((3,), 1e-9, torch.float32)


def test_float16_keeps_finite_values_where_the_rounded_scale_overflows() -> None:
    # p = 0.99998 rounds to 65535 / 65536: a scale of 65536, above float16's 65504, made
    # every kept element inf; torch's dropout (exact scale 50000) is used there instead
    torch.manual_seed(0)
    x = torch.ones(200_000, dtype=torch.float16)
    out = dropout(x, 0.99998)
    assert torch.isfinite(out).all() and torch.count_nonzero(out) > 0
    assert float(out.max()) == pytest.approx(1 / (1 - 0.99998), rel=1e-3)
    assert torch.isfinite(dropout(x.float(), 0.99998)).all()  # float32 keeps its own mask
    with pytest.raises(ValueError, match="overflows torch.float16"):
        keep_mask((3,), 0.99998, torch.float16)


def test_module_matches_torch_dropout_contract() -> None:
    layer = Dropout(0.3)
    assert isinstance(layer, torch.nn.Dropout)
    assert repr(layer) == repr(torch.nn.Dropout(0.3))
    x = torch.randn(50, 8)
    assert layer.eval()(x) is x
    layer.train()
    torch.manual_seed(6)
    out = layer(x)
    torch.manual_seed(6)
    torch.testing.assert_close(out, dropout(x, 0.3), rtol=0, atol=0)
    inplace = Dropout(0.3, inplace=True).train()
    y = x.clone()
    assert inplace(y).data_ptr() == y.data_ptr()


def test_training_expectation_matches_torch_dropout() -> None:
    """Averaged over many masks, graphattn's dropout and F.dropout agree on the mean and
    second moment of a layer's output (same distribution up to the 2**-16 rounding)."""
    torch.manual_seed(7)
    x = torch.randn(256)
    ours = torch.stack([dropout(x, 0.1) for _ in range(2000)])
    theirs = torch.stack([F.dropout(x, 0.1) for _ in range(2000)])
    torch.testing.assert_close(ours.mean(0), x, atol=0.15, rtol=0)
    spread_ours = ours.mean(0).sub(x).abs().mean()
    spread_theirs = theirs.mean(0).sub(x).abs().mean()
    torch.testing.assert_close(spread_ours, spread_theirs, atol=0.01, rtol=0)
    torch.testing.assert_close(ours.pow(2).mean(), theirs.pow(2).mean(), rtol=0.02, atol=0)


def test_models_use_it() -> None:
    model = MoleculeModel(MoleculeModelConfig(atom_dim=5, bond_dim=3, dropout=0.1))
    drops = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert drops and all(isinstance(m, Dropout) for m in drops)


def test_each_generator_is_the_one_in_use(mask_generator: str, monkeypatch) -> None:
    calls = []
    compiled = dropout_module._compiled_keep_mask
    monkeypatch.setattr(
        dropout_module, "_compiled_keep_mask", lambda *a: calls.append(a) or compiled(*a)
    )
    dropout(torch.ones(10), 0.5)
    assert len(calls) == (mask_generator == "numba")


def test_the_compiled_mask_is_the_documented_splitmix64_stream(monkeypatch):
    # pins the words and the tail: 69c8fb4 rewrote the loop that makes them
    if not numba_available():
        pytest.skip("Numba is not installed")
    monkeypatch.setattr(dropout_module, "numba_available", numba_available)  # either param
    seed, word_mask = 0x0123456789ABCDEF, 2**64 - 1
    monkeypatch.setattr(dropout_module, "_random_words", lambda count: torch.tensor([seed]))

    def word(w: int) -> int:
        z = (seed + (w + 1) * 0x9E3779B97F4A7C15) & word_mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & word_mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & word_mask
        return z ^ (z >> 31)

    n = 11  # two whole words of four 16-bit uniforms, and a tail of three
    uniforms = [(word(i // 4) >> (16 * (i % 4))) & 0xFFFF for i in range(n)]
    expected = [2.0 if u >= 2**15 else 0.0 for u in uniforms]
    assert keep_mask((n,), 0.5, torch.float64).tolist() == expected
