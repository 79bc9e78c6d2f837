"""The trainers' optimizer: fused AdamW where torch has it, the same updates as the default."""

from __future__ import annotations

import pytest
import torch

from graphattn.optim import adamw


def _train(make_optimizer, steps: int = 5) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
    optimizer = make_optimizer(model.parameters())
    x, y = torch.randn(32, 6), torch.randn(32, 1)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def test_fused_on_cpu_and_same_updates_as_default() -> None:
    optimizer = adamw(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    assert optimizer.defaults["fused"] is True
    fused = _train(lambda params: adamw(params, lr=1e-2, weight_decay=0.05))
    default = _train(lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.05))
    for a, b in zip(fused, default, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_meta_parameters_fall_back_to_the_default() -> None:
    params = torch.nn.Linear(2, 2, device="meta").parameters()
    assert not adamw(params, lr=1e-3).defaults["fused"]


def test_warmup_cosine_warms_up_follows_the_cosine_and_ends_at_the_final_fraction():
    import math

    from graphattn.train.loop import warmup_cosine

    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    schedule = warmup_cosine(optimizer, 4, 10, final_fraction=0.01)
    rates = []
    for _ in range(12):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[:5] == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])  # no step at lr 0
    # step 4 + k of the 6 decay steps: 0.01 + 0.99 * (1 + cos(pi k / 6)) / 2
    assert rates[5] == pytest.approx(0.01 + 0.99 * (2 + math.sqrt(3)) / 4)
    assert rates[7] == pytest.approx(0.505)  # halfway down
    assert rates[9] == pytest.approx(0.01 + 0.99 * (2 - math.sqrt(3)) / 4)
    assert rates[10] == pytest.approx(0.01) and rates[11] == pytest.approx(0.01)


def learning_rates(warmup: int, total: int) -> list[float]:
    from graphattn.train.loop import warmup_cosine

    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    schedule = warmup_cosine(optimizer, warmup, total, final_fraction=0.01)
    rates = []
    for _ in range(total):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return rates


@pytest.mark.parametrize(("warmup", "total"), [(35, 14), (35, 21), (10, 10), (3, 1)])
def test_a_warm_up_at_least_as_long_as_the_run_is_cut_to_half_of_it(warmup, total):
    rates = learning_rates(warmup, total)
    half = total // 2  # --epochs 2 with the 5-epoch warm-up ramped to 0.4 x lr, no decay
    assert rates[:half] == pytest.approx([(i + 1) / half for i in range(half)])
    assert max(rates) == pytest.approx(1.0) and rates[half] == pytest.approx(1.0)
    if total > 2:
        assert rates[-1] < 0.5  # decayed before the end


def test_a_warm_up_shorter_than_the_run_is_kept():
    rates = learning_rates(5, 8)  # e.g. --epochs 8 with the 5-epoch warm-up
    assert rates[:6] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.0])


def test_adamw_defaults_and_which_parameters_it_fuses() -> None:
    cpu = torch.nn.Parameter(torch.zeros(2))
    meta = torch.nn.Parameter(torch.zeros(2, device="meta"))
    default = adamw([cpu], lr=1e-3)
    assert default.defaults["weight_decay"] == 0.01  # the benchmarks' training step uses it
    assert default.defaults["lr"] == 1e-3
    assert not adamw([cpu, meta], lr=1e-3).defaults["fused"]  # one unsupported device: none
    complex_param = torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))
    assert not adamw([cpu, complex_param], lr=1e-3).defaults["fused"]  # not floating point
