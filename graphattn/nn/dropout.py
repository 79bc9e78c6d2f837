"""``torch.nn.Dropout`` with graphattn's cheaper CPU mask."""

from __future__ import annotations

from torch import Tensor, nn

from graphattn.ops.dropout import dropout

__all__ = ["Dropout"]


class Dropout(nn.Dropout):
    """Drop-in for :class:`torch.nn.Dropout` that draws its CPU masks with
    :func:`graphattn.ops.dropout.dropout` (four 16-bit uniforms per generator call; the
    drop probability is rounded to a multiple of ``2**-16``). On CUDA, and with
    ``inplace=True``, it is :class:`torch.nn.Dropout`.

    Args:
        p (float): drop probability in ``[0, 1]``.
        inplace (bool): modify the input in place (uses ``torch.nn.Dropout``).

    Shapes:
        - input: ``x`` of any shape
        - output: same shape as the input
    """

    def forward(self, x: Tensor) -> Tensor:
        if self.inplace:
            return super().forward(x)
        return dropout(x, self.p, self.training)
