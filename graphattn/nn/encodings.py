r"""Learned injection of positional / structural encodings into node features."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from graphattn.errors import GraphInputError, check_count
from graphattn.ops.graph import NEGATIVE_GRAPH_ID, validate_batch

__all__ = ["PositionalEncoder"]

_MODES = ("add", "concat")


class PositionalEncoder(nn.Module):
    r"""Project a positional encoding linearly and add it to, or concatenate it with, ``x``.

    .. math::
        \text{add:}\quad \mathbf{x}'_i = \mathbf{x}_i + \mathbf{W}\,(\mathbf{s}_{g(i)} \odot
        \mathbf{p}_i) + \mathbf{b},
        \qquad
        \text{concat:}\quad \mathbf{x}'_i = \big[\,\mathbf{x}_i \,\|\,
        \mathbf{W}\,(\mathbf{s}_{g(i)} \odot \mathbf{p}_i) + \mathbf{b}\,\big],

    where :math:`\mathbf{p}_i` is the encoding of node :math:`i` (e.g. from
    :func:`~graphattn.transforms.laplacian_pe`), :math:`g(i)` its graph in the mini-batch and
    :math:`\mathbf{s}_g \in \{-1, +1\}^{\text{pe\_dim}}`.

    Sign flips: an eigenvector :math:`\mathbf{v}` of the Laplacian is only defined up to sign
    (:math:`-\mathbf{v}` is as valid), so with ``sign_flip=True`` and in training mode
    (``self.training``) every column of the encoding of every graph is multiplied by an
    independent, uniformly drawn sign :math:`\mathbf{s}_g` at each call; all nodes of a graph
    share their graph's signs. This teaches the model not to rely on the arbitrary sign. In
    evaluation mode :math:`\mathbf{s}_g = \mathbf{1}`. Use ``sign_flip=False`` for encodings
    whose sign means something (random-walk, sinusoidal).

    Args:
        in_channels (int): width :math:`F` of the node features ``x``.
        pe_dim (int): width :math:`k` of the encoding ``pe``.
        out_channels (int, optional): output width. For ``"add"`` it must be :obj:`None` or
            equal to ``in_channels``; for ``"concat"`` it is required and must exceed
            ``in_channels`` (the projection has ``out_channels - in_channels`` outputs).
            (default: :obj:`None`)
        mode (str, optional): ``"add"`` or ``"concat"``. (default: :obj:`"add"`)
        sign_flip (bool, optional): random per-graph sign flips of the encoding's columns in
            training mode. (default: :obj:`True`)

    Shapes:
        - **input:** node features :math:`(N, F)`, encoding :math:`(N, k)`, optional graph ids
          :math:`(N)`
        - **output:** node features :math:`(N, F_{out})`, with :math:`F_{out} = F` for
          ``"add"`` and ``out_channels`` for ``"concat"``
    """

    def __init__(
        self,
        in_channels: int,
        pe_dim: int,
        out_channels: int | None = None,
        mode: str = "add",
        sign_flip: bool = True,
    ) -> None:
        super().__init__()
        in_channels = check_count("in_channels", in_channels)
        pe_dim = check_count("pe_dim", pe_dim)
        if mode not in _MODES:
            raise GraphInputError(f"mode must be one of {_MODES}, got {mode!r}")
        if mode == "add":
            if out_channels is not None and out_channels != in_channels:
                raise GraphInputError(
                    f"mode='add' needs out_channels == in_channels ({in_channels}), "
                    f"got {out_channels}"
                )
            proj_channels = in_channels
        else:
            if out_channels is not None:
                out_channels = check_count("out_channels", out_channels)
            if out_channels is None or out_channels <= in_channels:
                raise GraphInputError(
                    f"mode='concat' needs out_channels > in_channels ({in_channels}), "
                    f"got {out_channels}"
                )
            proj_channels = out_channels - in_channels
        self.in_channels = in_channels
        self.pe_dim = pe_dim
        self.out_channels = in_channels if mode == "add" else out_channels
        self.mode = mode
        self.sign_flip = sign_flip
        self.proj = nn.Linear(pe_dim, proj_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise the projection."""
        self.proj.reset_parameters()

    def _flip_signs(self, pe: Tensor, batch: Tensor | None, num_graphs: int | None) -> Tensor:
        """``pe`` with every column multiplied by a random sign drawn per graph."""
        if num_graphs is not None:
            num_graphs = check_count("num_graphs", num_graphs, least=0)
        if batch is None:
            batch = torch.zeros(pe.size(0), dtype=torch.long, device=pe.device)
            num_graphs = 1
        elif batch.numel() > 0:
            low, high = torch.stack([batch.min(), batch.max()]).tolist()  # one sync
            if low < 0:
                raise GraphInputError(NEGATIVE_GRAPH_ID)
            if num_graphs is None:
                num_graphs = high + 1
            elif high >= num_graphs:
                raise GraphInputError(f"batch holds graph id {high}, but num_graphs={num_graphs}")
        elif num_graphs is None:
            num_graphs = 0
        bits = torch.randint(0, 2, (num_graphs, pe.size(1)), device=pe.device)
        signs = (2 * bits - 1).to(pe.dtype)
        return pe * signs[batch]

    def forward(
        self,
        x: Tensor,
        pe: Tensor,
        batch: Tensor | None = None,
        num_graphs: int | None = None,
    ) -> Tensor:
        r"""Inject ``pe`` into ``x``.

        Args:
            x (torch.Tensor): node features, shape :math:`[N, F]`.
            pe (torch.Tensor): positional encoding, shape :math:`[N, k]`.
            batch (torch.Tensor, optional): graph id of every node, shape :math:`[N]`;
                :obj:`None` means one graph. Only used for the sign flips.
                (default: :obj:`None`)
            num_graphs (int, optional): number of graphs in ``batch``, more than its
                largest id. (default: :obj:`None`: that id + 1)

        Returns:
            torch.Tensor: shape :math:`[N, F_{out}]`.
        """
        if x.dim() != 2 or x.size(1) != self.in_channels:
            raise GraphInputError(
                f"x must have shape [N, {self.in_channels}], got {tuple(x.shape)}"
            )
        if pe.dim() != 2 or pe.shape != (x.size(0), self.pe_dim):
            raise GraphInputError(
                f"pe must have shape [{x.size(0)}, {self.pe_dim}], got {tuple(pe.shape)}"
            )
        if batch is not None:
            validate_batch(batch, x.size(0), check_ids=False)  # the ids where they are used
        pe = pe.to(x.dtype)
        if self.sign_flip and self.training:
            pe = self._flip_signs(pe, batch, num_graphs)
        projected = self.proj(pe)
        if self.mode == "add":
            return x + projected
        return torch.cat([x, projected], dim=-1)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, pe_dim={self.pe_dim}, "
            f"out_channels={self.out_channels}, mode={self.mode!r}, sign_flip={self.sign_flip})"
        )
