"""The implementations under test: attention layers and whole molecule models.

graphattn's :class:`~graphattn.nn.attention.GraphSelfAttention` in four settings, PyG's
:class:`~torch_geometric.nn.TransformerConv`, and :class:`PyGMoleculeModel`, the
architecture of :class:`~graphattn.models.molecule.MoleculeModel` rebuilt from
``TransformerConv``.

Differences that stay: graphattn attends over the edges plus a self-loop per node and
applies an output projection; ``TransformerConv`` attends over the edges only and adds
a projected skip connection (``root_weight``). Both layers have the same number of
weight matrices (query, key, value, edge, and output or skip). Both molecule models
compute the same edge terms, the layer's edge map applied to the bond encoder's output;
``MoleculeModel`` composes the two linear maps first
(:class:`~graphattn.nn.edge_features.LinearEdgeEncoding`), the PyG mirror feeds the
encoded ``[E, hidden]`` features to ``TransformerConv`` as PyG users do.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from graphattn.bench.cases import CaseSpec
from graphattn.models.molecule import MoleculeModel, MoleculeModelConfig
from graphattn.models.readout import Readout
from graphattn.nn.attention import GraphSelfAttention
from graphattn.nn.transformer import ffn_width, make_norm

__all__ = [
    "AttentionUnderTest",
    "PyGMoleculeModel",
    "build_attention",
    "build_molecule_model",
    "molecule_config",
]

# graphattn implementation name -> (mode, kernel) of GraphSelfAttention
_LAYER_SETTINGS = {
    "fused": ("sparse", "fused"),
    "reference": ("sparse", "reference"),
    "dense": ("dense", "auto"),
    "auto": ("auto", "auto"),
}


class AttentionUnderTest(nn.Module):
    """One attention layer behind a common call: ``(x, edge_index, batch) -> [N, C]``."""

    def __init__(self, layer: nn.Module, takes_batch: bool) -> None:
        super().__init__()
        self.layer = layer
        self.takes_batch = takes_batch

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor | None = None) -> Tensor:
        if self.takes_batch:
            return self.layer(x, edge_index, batch=batch)
        return self.layer(x, edge_index)


def build_attention(spec: CaseSpec) -> AttentionUnderTest:
    """The layer of ``spec.impl`` with F inputs and ``heads x head_dim`` outputs."""
    torch.manual_seed(spec.seed)
    out_channels = spec.heads * spec.head_dim
    if spec.impl == "pyg":
        from torch_geometric.nn import TransformerConv

        conv = TransformerConv(spec.in_channels, spec.head_dim, heads=spec.heads)
        return AttentionUnderTest(conv, takes_batch=False)
    mode, kernel = _LAYER_SETTINGS[spec.impl]
    layer = GraphSelfAttention(
        spec.in_channels,
        out_channels,
        heads=spec.heads,
        mode=mode,
        kernel=kernel,
        max_dense_bytes=spec.max_dense_bytes,
    )
    return AttentionUnderTest(layer, takes_batch=True)


def molecule_config(atom_dim: int, bond_dim: int, max_dense_bytes: int) -> MoleculeModelConfig:
    """The molecule model both implementations build: graphattn's default architecture."""
    return MoleculeModelConfig(
        atom_dim=atom_dim,
        bond_dim=bond_dim,
        attention={"max_dense_bytes": max_dense_bytes},
    )


class _PyGBlock(nn.Module):
    """Pre-norm block: ``h = x + drop(conv(norm(x)))``, ``out = h + drop(ffn(norm(h)))``."""

    def __init__(self, config: MoleculeModelConfig) -> None:
        super().__init__()
        from torch_geometric.nn import TransformerConv

        c = config.hidden
        self.conv = TransformerConv(
            c,
            c // config.heads,
            heads=config.heads,
            dropout=0.0,  # MoleculeModel has no dropout on the attention weights either
            edge_dim=c if config.bond_dim else None,
        )
        hidden = ffn_width(c, config.ffn_ratio)
        self.ffn = nn.Sequential(
            nn.Linear(c, hidden), nn.GELU(), nn.Dropout(config.dropout), nn.Linear(hidden, c)
        )
        self.norm_attention = make_norm(config.norm, c)
        self.norm_ffn = make_norm(config.norm, c)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None) -> Tensor:
        h = x + self.dropout(self.conv(self.norm_attention(x), edge_index, edge_attr))
        return h + self.dropout(self.ffn(self.norm_ffn(h)))


class PyGMoleculeModel(nn.Module):
    """:class:`~graphattn.models.molecule.MoleculeModel`'s architecture on ``TransformerConv``.

    Same atom and bond encoders, hidden width, heads, layers, feed-forward blocks,
    norms, readout and head; only the attention layer differs.
    """

    def __init__(self, config: MoleculeModelConfig) -> None:
        super().__init__()
        c = config
        self.atom_encoder = nn.Linear(c.atom_dim, c.hidden)
        self.bond_encoder = nn.Linear(c.bond_dim, c.hidden) if c.bond_dim else None
        self.layers = nn.ModuleList(_PyGBlock(c) for _ in range(c.layers))
        self.final_norm = make_norm(c.norm, c.hidden)
        self.readout = Readout(c.hidden, c.readout)
        self.head = nn.Sequential(
            nn.Linear(self.readout.out_channels, c.hidden),
            nn.GELU(),
            nn.Dropout(c.dropout),
            nn.Linear(c.hidden, c.num_tasks),
        )

    def forward(self, data) -> Tensor:
        h = self.atom_encoder(data.x)
        edge_attr = None
        if self.bond_encoder is not None:
            edge_attr = self.bond_encoder(data.edge_attr.to(h.dtype))
        for layer in self.layers:
            h = layer(h, data.edge_index, edge_attr)
        pooled = self.readout(self.final_norm(h), data.batch, int(data.num_graphs))
        return self.head(pooled)


def build_molecule_model(
    impl: str, atom_dim: int, bond_dim: int, max_dense_bytes: int, seed: int = 0
) -> nn.Module:
    """``"graphattn"``: :class:`MoleculeModel`; ``"pyg"``: :class:`PyGMoleculeModel`."""
    torch.manual_seed(seed)
    config = molecule_config(atom_dim, bond_dim, max_dense_bytes)
    if impl == "graphattn":
        return MoleculeModel(config)
    if impl == "pyg":
        return PyGMoleculeModel(config)
    raise ValueError(f"unknown molecule model implementation {impl!r}")
