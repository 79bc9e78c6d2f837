r"""Dropout with a cheaper random mask on CPU.

.. math::
    \mathrm{dropout}(x)_i = x_i \cdot m_i / (1 - p), \qquad m_i \sim \mathrm{Bernoulli}(1 - p)

On CPU, ``torch.nn.functional.dropout`` draws the mask with ``bernoulli_``, one call of
the generator per element, which made it a sixth of a molecule training step. Here each
64-bit draw of the same generator (``torch.Tensor.random_``, Mersenne Twister, seeded by
``torch.manual_seed``) is split into four independent 16-bit uniforms, and an element is
kept when its uniform (in :math:`[0, 2^{16})`) is at least
:math:`\mathrm{round}(p \cdot 2^{16})`: four times fewer generator calls and no
floating-point sampling. The drop probability is thus rounded to a multiple of
:math:`2^{-16}`, and the kept elements are scaled by the exact inverse of the rounded keep
probability, so the expectation is unchanged. For one ``[1743, 128]`` tensor (a feed-
forward hidden layer of an ESOL batch) this took 0.26–0.66 ms against torch's 1.35–1.62
ms on the development machine (``benchmarks/training_step_breakdown.py``,
``components_ms``, two runs).

Where Numba is installed (:mod:`graphattn.ops.compiled`) and the tensor is float32 or
float64, the 64-bit words come instead from a counter-based generator compiled with
Numba: word w is the SplitMix64 finaliser of ``seed + (w + 1) * 0x9E3779B97F4A7C15``,
with one seed drawn per call from torch's generator (so ``torch.manual_seed`` still
makes runs repeatable), and the mask is written in the same loop. That
replaces three passes over memory (the generator, the comparison, the scaling) with one:
0.07 ms instead of 0.22-0.40 ms for a ``[1743, 128]`` mask. The masks differ
from the torch path's, so results with and without Numba differ as with another seed.

Elsewhere (CUDA has a fused dropout kernel), and for probabilities that round to 0 or 1,
this is ``torch.nn.functional.dropout``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from graphattn.ops.compiled import DTYPES, jit, numba_available

__all__ = ["dropout", "keep_mask"]

_LEVELS = 1 << 16  # values of a 16-bit uniform


def _drop_levels(p: float) -> int:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    return round(p * _LEVELS)


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, dtype: torch.dtype) -> Tensor:
    """A CPU tensor of ``shape``: ``1 / (1 - p')`` where an element is kept, else 0.

    ``p'`` is ``p`` rounded to a multiple of ``2**-16``; each element is kept
    independently with probability ``1 - p'``.

    Args:
        shape: shape of the mask.
        p (float): drop probability, in ``(0, 1)`` after rounding.
        dtype: floating dtype of the mask.
    """
    drop_levels = _drop_levels(p)
    if not 0 < drop_levels < _LEVELS:
        raise ValueError(f"p={p} rounds to {drop_levels / _LEVELS}; use F.dropout")
    if not _scale_fits(drop_levels, dtype):
        raise ValueError(f"p={p} keeps 1 element in {_LEVELS}: its scale overflows {dtype}")
    return _keep_mask(shape, drop_levels, dtype)


def _scale_fits(drop_levels: int, dtype: torch.dtype) -> bool:
    # float16 tops out at 65504, below the scale 65536 of p rounded to 65535 / 65536
    return _LEVELS / (_LEVELS - drop_levels) <= torch.finfo(dtype).max


def _keep_mask(shape: torch.Size | tuple[int, ...], drop_levels: int, dtype: torch.dtype) -> Tensor:
    scale = _LEVELS / (_LEVELS - drop_levels)
    if dtype in DTYPES and numba_available():
        return _compiled_keep_mask(shape, drop_levels, scale, dtype)
    count = torch.Size(shape).numel()
    words = _random_words((count + 3) // 4)
    uniforms = words.view(torch.int16)[:count].view(shape)  # each in [-2**15, 2**15)
    mask = torch.ge(uniforms, drop_levels - _LEVELS // 2, out=torch.empty(shape, dtype=dtype))
    return mask.mul_(scale)


def _random_words(count: int) -> Tensor:
    """``[count]`` int64 words of 64 random bits from torch's (seeded) generator."""
    return torch.empty(count, dtype=torch.int64).random_(-(2**63), None)


@functools.cache
def _fill_mask():
    """``fill(out, seed, drop_levels, scale)``: the compiled mask loop (see above).

    One thread: with Numba's threads the loop took longer (0.14 against 0.07 ms for a
    ``[1743, 128]`` mask on 2 cores).
    """
    golden = np.uint64(0x9E3779B97F4A7C15)
    mix1, mix2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)

    # No compiled helper in the closure: Numba keys its disk cache on the pickled
    # closure, and a compiled function pickles with an id new in each process, so a
    # closure over one missed the cache and compiled again in every process.
    @jit(False)
    def fill(out, seed, drop_levels, scale):
        def word(w):
            """SplitMix64 of the word's counter: 64 random bits."""
            z = seed + np.uint64(w + 1) * golden
            z = (z ^ (z >> np.uint64(30))) * mix1
            z = (z ^ (z >> np.uint64(27))) * mix2
            return z ^ (z >> np.uint64(31))

        n = out.size
        zero = scale - scale
        for w in range(n // 4):
            z = word(w)
            for lane in range(4):  # the word's four 16-bit uniforms
                uniform = (z >> np.uint64(16 * lane)) & np.uint64(0xFFFF)
                out[4 * w + lane] = scale if uniform >= drop_levels else zero
        z = word(n // 4)
        for lane in range(n % 4):
            uniform = (z >> np.uint64(16 * lane)) & np.uint64(0xFFFF)
            out[n - n % 4 + lane] = scale if uniform >= drop_levels else zero

    return fill


def _compiled_keep_mask(
    shape: torch.Size | tuple[int, ...], drop_levels: int, scale: float, dtype: torch.dtype
) -> Tensor:
    mask = torch.empty(shape, dtype=dtype)
    seed = np.uint64(int(_random_words(1)) % 2**64)
    flat = mask.view(-1).numpy()
    _fill_mask()(flat, seed, np.uint64(drop_levels), flat.dtype.type(scale))
    return mask


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element of ``x`` with probability ``p`` and scale the rest by ``1/(1-p)``.

    Same contract as ``torch.nn.functional.dropout(x, p, training)`` (not in place); see
    the module docstring for how the CPU mask is drawn.

    Args:
        x (Tensor): input of any shape.
        p (float): drop probability in ``[0, 1]``.
        training (bool): identity when ``False``.
    """
    drop_levels = _drop_levels(p)
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not x.is_floating_point() or not 0 < drop_levels < _LEVELS:
        return F.dropout(x, p, training)
    if torch.compiler.is_compiling():  # the Numba mask cannot be traced
        return F.dropout(x, p, training)
    if not _scale_fits(drop_levels, x.dtype):
        return F.dropout(x, p, training)
    # a plain product: autograd saves only the mask, like F.dropout
    return x * _keep_mask(x.shape, drop_levels, x.dtype)
