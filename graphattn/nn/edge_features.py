r"""Edge features given as a linear encoding of raw ones, left unevaluated.

A molecule model encodes its R raw bond features once, :math:`e = W_b r + b_b`
(``[E, C]``), and every attention layer projects them again, :math:`W_e e + b_e`. The
two maps compose:

.. math::
    W_e (W_b r + b_b) + b_e = (W_e W_b)\, r + (W_e b_b + b_e)

so each layer can apply the composed ``C x R`` map to the R-wide raw features instead
of its ``C x C`` map to the C-wide encoded ones: the same values and the same gradients
for both weights, with R instead of C multiply-adds per edge and output channel (R = 7
bond features against C = 64 channels for the default molecule model), and no
``[E, C]`` encoding to keep for backward.

Pass a :class:`LinearEdgeEncoding` wherever :class:`~graphattn.nn.GraphSelfAttention`
takes ``edge_attr``; :meth:`LinearEdgeEncoding.materialize` gives the plain tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from graphattn.errors import GraphInputError
from graphattn.ops.graph import EdgeSet, check_finite

__all__ = ["LinearEdgeEncoding"]

_CACHE_SLOT = "linear_edge_encoding"


@dataclass(frozen=True)
class LinearEdgeEncoding:
    """The edge features ``encoder(raw)``, not computed until a layer needs them.

    Args:
        raw: ``[E, R]`` raw edge features (``R = encoder.in_features``).
        encoder: the linear map to the ``[E, encoder.out_features]`` encoded features.
    """

    raw: Tensor
    encoder: nn.Linear

    def __post_init__(self) -> None:
        width = self.encoder.in_features
        if self.raw.dim() != 2 or self.raw.size(1) != width:
            raise GraphInputError(
                f"raw edge features must have shape [E, {width}] for the encoder "
                f"{self.encoder}, got {list(self.raw.shape)}"
            )

    @property
    def out_features(self) -> int:
        return self.encoder.out_features

    def materialize(self) -> Tensor:
        """``[E, out_features]``: ``encoder(raw)``."""
        return self.encoder(self.raw.to(self.encoder.weight.dtype))

    def project(self, edges: EdgeSet, linear: nn.Linear) -> Tensor:
        """``[E', C]``: ``linear`` applied to the encoded features on the prepared edges.

        Equal to ``linear(edges.merge_edge_features(encoder(raw)))``, except that
        prepared edges without an input edge (added self-loops, k-hop pairs) get
        ``linear(0) = linear.bias``, as :class:`~graphattn.nn.GraphSelfAttention` gives
        them with plain edge features. Computed as one product of the composed map
        with ``[merged raw, has an input edge, 1]`` (built once per edge set).
        """
        weight_t = linear.weight.t()
        no_bias = weight_t.new_zeros(weight_t.size(1))  # a missing bias is a zero row
        encoder_bias = self.encoder.bias
        inner = no_bias if encoder_bias is None else encoder_bias @ weight_t
        outer = no_bias if linear.bias is None else linear.bias
        # The composed map is built as a row-major [R + 2, C] matrix and applied with a
        # plain product, not F.linear: autograd then gets its gradient as inputs^T @ grad
        # ([R + 2, E'] @ [E', C]). F.linear's gradient, grad^T @ inputs, is an
        # [C, E'] @ [E', R + 2] product with a 9-column result, which the CPU BLAS runs
        # 2-4x slower.
        composed_t = torch.cat([self.encoder.weight.t() @ weight_t, inner[None], outer[None]])
        return self._prepared_inputs(edges, weight_t.dtype) @ composed_t

    def _prepared_inputs(self, edges: EdgeSet, dtype: torch.dtype) -> Tensor:
        """``[E', R + 2]``: merged raw features, the has-an-input-edge indicator and a
        column of ones.

        Kept in one slot of the edge set's cache, so that a stack of layers builds it
        once per graph (not for raw features that need a gradient: the cached tensor
        would carry one step's autograd graph into the next).
        """
        # The lookup checks requires_grad too: a tensor cached while raw needed no
        # gradient would cut raw off from autograd once it does (requires_grad_() does
        # not change raw._version).
        # Inference tensors have no version counter to notice an in-place edit by.
        cacheable = not self.raw.requires_grad and not self.raw.is_inference()
        stamp = (self.raw._version, dtype) if cacheable else None
        hit = edges.cache.get(_CACHE_SLOT)
        if cacheable and hit is not None and hit[0] is self.raw and hit[1] == stamp:
            return hit[2]
        check_finite(edge_attr=self.raw)  # once per graph: the result is cached
        indicator = (edges.input_count > 0).to(dtype).unsqueeze(1)
        merged = edges.merge_edge_features(self.raw.to(dtype))
        inputs = torch.cat([merged, indicator, torch.ones_like(indicator)], dim=1)
        if cacheable:
            edges.cache[_CACHE_SLOT] = (self.raw, stamp, inputs)
        return inputs
