"""graphattn.nn.Dropout: torch's dropout distribution, with a faster CPU mask."""

from __future__ import annotations

import pytest
import torch

from graphattn.nn import Dropout


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_training_zeroes_a_fraction_p_and_rescales_the_rest(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(400, 250) + 0.5  # no zeros of its own
    y = Dropout(p).train()(x)
    dropped = y == 0
    # 100,000 draws: the observed rate is within 1% of p with overwhelming probability
    assert abs(float(dropped.float().mean()) - p) < 0.01
    torch.testing.assert_close(y[~dropped], x[~dropped] / (1 - p))


def test_gradient_is_the_mask_times_the_scale() -> None:
    x = torch.randn(50, 20, requires_grad=True)
    y = Dropout(0.3).train()(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    expected = (y != 0).float() / 0.7
    torch.testing.assert_close(grad, expected)


def test_eval_and_edge_probabilities() -> None:
    x = torch.randn(10, 4)
    assert torch.equal(Dropout(0.5).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert bool((Dropout(1.0).train()(x) == 0).all())
    with pytest.raises(ValueError):
        Dropout(1.5)


def test_seeded_runs_repeat() -> None:
    x = torch.randn(30, 30)
    torch.manual_seed(3)
    first = Dropout(0.2).train()(x)
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.2).train()(x), first)
