"""Graph-level property prediction for molecules.

atom features -> atom encoder -> L x GraphTransformerLayer (bond features in attention)
-> norm -> readout -> MLP head -> one output per task.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from graphattn.errors import GraphInputError, check_count
from graphattn.models.checks import check_architecture, check_attention_options
from graphattn.models.readout import Readout
from graphattn.nn.dropout import Dropout
from graphattn.nn.edge_features import LinearEdgeEncoding
from graphattn.nn.encodings import PositionalEncoder
from graphattn.nn.hybrid import HybridLayer
from graphattn.nn.transformer import GraphTransformerLayer, ffn_width, make_norm
from graphattn.transforms import AddLaplacianPE, AddRandomWalkPE

__all__ = ["LAYER_TYPES", "MoleculeEnsemble", "MoleculeModel", "MoleculeModelConfig"]

LAYER_TYPES = {"transformer": GraphTransformerLayer, "hybrid": HybridLayer}
PE_ATTRIBUTES = {None: None, "lap": "lap_pe", "rw": "rw_pe"}
TASKS = ("regression", "classification")


# Layer arguments set from MoleculeModelConfig's fields (edge_dim from bond_dim).
MOLECULE_LAYER_OPTIONS = (
    "channels",
    "in_channels",
    "out_channels",
    "heads",
    "ffn_ratio",
    "dropout",
    "norm",
    "edge_dim",
    "mode",
)


@dataclass
class MoleculeModelConfig:
    """Architecture of :class:`MoleculeModel` (saved in checkpoints as a plain dict).

    Attributes:
        atom_dim: width of the featurizer's atom vectors.
        bond_dim: width of the featurizer's bond vectors (0: no bond features).
        num_tasks: number of predicted targets T.
        hidden: node width C inside the network, a multiple of ``heads``.
        layers: number of :class:`GraphTransformerLayer` blocks (0: none, a baseline that
            pools the encoded atoms without attention).
        heads: attention heads per layer.
        ffn_ratio: feed-forward width as a multiple of C.
        dropout: dropout inside the layers and the head. With a ``max`` readout it is
            not neutral at evaluation: noise raises the per-atom maxima during training,
            so the head is fitted to larger maxima than it sees in eval mode. It still
            wins on small data sets (ESOL, FreeSolv); on large corpora try 0
            (``benchmarks/molecules.md``, "dropout against the max readout").
        readout: poolings to concatenate (``mean``, ``sum``, ``max``, ``attention``).
        norm: ``layer``, ``batch`` or ``none``.
        mode: attention mode (``sparse``, ``dense``, ``auto``).
        task: ``regression`` or ``classification`` (logits; binary per task).
        mol_dim: width of whole-molecule descriptors ``mol_x`` fed to the head next to
            the pooled graph vector (0: none). They are standardised with training-set
            statistics kept as buffers (see :meth:`MoleculeModel.fit_descriptor_scaler`).
        layer_type: ``transformer`` (:class:`GraphTransformerLayer`) or ``hybrid``
            (:class:`HybridLayer`: edge-restricted + global attention, GraphGPS style).
        pe: positional encoding added to the atom vectors: ``None``, ``lap`` (Laplacian
            eigenvectors, random sign flips in training) or ``rw`` (random-walk landing
            probabilities); computed per molecule by :meth:`MoleculeModel.pe_transform`.
            ``lap`` depends on the atom order where eigenvalues repeat, or where atoms
            tie for an eigenvector's largest entry with opposite signs and its sum of
            cubes is 0 (which sets its sign): in symmetric molecules and some others,
            so its predictions change with how a SMILES is written; ``rw`` does not.
        pe_dim: number of encoding columns k.
        attention: extra keyword arguments of :class:`GraphSelfAttention` (``score``,
            ``normalize``, ``hops``, ``attend``, ``hop_bias``, ...).
    """

    atom_dim: int
    bond_dim: int
    num_tasks: int = 1
    hidden: int = 64
    layers: int = 3
    heads: int = 4
    ffn_ratio: float = 2.0
    dropout: float = 0.1
    readout: tuple[str, ...] = ("mean", "max")
    norm: str = "layer"
    mode: str = "sparse"
    task: str = "regression"
    mol_dim: int = 0
    layer_type: str = "transformer"
    pe: str | None = None
    pe_dim: int = 8
    attention: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise GraphInputError(f"task must be one of {TASKS}, got {self.task!r}")
        check_architecture(self.hidden, self.layers, self.heads, dropout=self.dropout)
        ffn_width(self.hidden, self.ffn_ratio)
        check_attention_options(self.attention, "MoleculeModelConfig", MOLECULE_LAYER_OPTIONS)
        sizes = [("atom_dim", 1), ("bond_dim", 0), ("num_tasks", 1), ("mol_dim", 0)]
        if self.pe is not None:
            sizes.append(("pe_dim", 1))
        for name, least in sizes:  # NumPy integers too, as the layers take them
            setattr(self, name, check_count(name, getattr(self, name), least))

    def to_dict(self) -> dict:
        """The fields as a plain dict (what checkpoints store; ``from_dict`` reads it)."""
        d = asdict(self)
        d["readout"] = list(self.readout)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> MoleculeModelConfig:
        d = dict(d)
        if "readout" in d:  # JSON gives a list; a missing key keeps the class default
            d["readout"] = tuple(d["readout"])
        return cls(**d)


def pe_transform(config: MoleculeModelConfig) -> BaseTransform | None:
    """The PyG transform that adds ``config.pe`` to each molecule (or None)."""
    if config.pe == "lap":
        return AddLaplacianPE(config.pe_dim, attr_name=PE_ATTRIBUTES["lap"])
    if config.pe == "rw":
        return AddRandomWalkPE(config.pe_dim, attr_name=PE_ATTRIBUTES["rw"])
    return None


class MoleculeModel(nn.Module):
    """Predict T properties of each molecule (graph) of a PyG batch.

    Args:
        config: a :class:`MoleculeModelConfig`.

    Shapes:
        - input: data, a ``Batch`` (or a single ``Data``: one graph) with
          ``x [N, atom_dim]``, ``edge_index [2, E]``, ``edge_attr [E, bond_dim]``,
          ``batch [N]``
        - output: ``[num_graphs, T]`` (standardised targets, or logits)
    """

    def __init__(self, config: MoleculeModelConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.atom_encoder = nn.Linear(c.atom_dim, c.hidden)
        self.bond_encoder = nn.Linear(c.bond_dim, c.hidden) if c.bond_dim else None
        if c.layer_type not in LAYER_TYPES:
            raise GraphInputError(f"layer_type must be one of {tuple(LAYER_TYPES)}")
        if c.pe not in PE_ATTRIBUTES:
            raise GraphInputError(f"pe must be one of {tuple(PE_ATTRIBUTES)}, got {c.pe!r}")
        self.pe_encoder = (
            PositionalEncoder(c.hidden, c.pe_dim, sign_flip=c.pe == "lap") if c.pe else None
        )
        self.layers = nn.ModuleList(
            LAYER_TYPES[c.layer_type](
                c.hidden,
                c.heads,
                ffn_ratio=c.ffn_ratio,
                dropout=c.dropout,
                norm=c.norm,
                edge_dim=c.hidden if c.bond_dim else None,
                mode=c.mode,
                **c.attention,
            )
            for _ in range(c.layers)
        )
        self.final_norm = make_norm(c.norm, c.hidden)
        self.readout = Readout(c.hidden, c.readout)
        self.register_buffer("mol_mean", torch.zeros(c.mol_dim))
        self.register_buffer("mol_std", torch.ones(c.mol_dim))
        self.head = nn.Sequential(
            nn.Linear(self.readout.out_channels + c.mol_dim, c.hidden),
            nn.GELU(),
            Dropout(c.dropout),
            nn.Linear(c.hidden, c.num_tasks),
        )

    @torch.no_grad()
    def fit_descriptor_scaler(self, mol_x: Tensor) -> None:
        """Set the descriptor standardisation from the training molecules' ``[n, mol_dim]``."""
        self.mol_mean.copy_(mol_x.mean(0))
        # one training molecule has no spread (its sample std is NaN): leave the scale at 1
        std = mol_x.std(0) if mol_x.size(0) > 1 else torch.ones_like(self.mol_std)
        self.mol_std.copy_(std.clamp(min=1e-6))

    def pe_transform(self) -> BaseTransform | None:
        """The PyG transform that adds this model's positional encoding (or None)."""
        return pe_transform(self.config)

    def set_mode(self, mode: str) -> None:
        """Switch every attention layer to ``sparse``, ``dense`` or ``auto``."""
        for layer in self.layers:
            layer.mode = mode

    def _positional_encoding(self, data: Data) -> Tensor:
        name = PE_ATTRIBUTES[self.config.pe]
        pe = getattr(data, name, None)
        if pe is None:
            raise GraphInputError(
                f"pe={self.config.pe!r} needs data.{name}: apply model.pe_transform() to each "
                "molecule (the trainers do)"
            )
        return pe

    def node_embeddings(self, data: Data, batch: Tensor | None = None) -> Tensor:
        """``[N, hidden]`` atom vectors after the transformer stack (``batch``: the graph
        of each atom, by default ``data.batch``; ``None`` there is one graph)."""
        batch = data.batch if batch is None else batch
        width = self.config.atom_dim
        if data.x.dim() != 2 or data.x.size(1) != width:
            raise GraphInputError(
                f"data.x must be [num_atoms, {width}] (the atom features this model reads), "
                f"got {list(data.x.shape)}: featurize the graphs as in training"
            )
        h = self.atom_encoder(data.x)
        if self.pe_encoder is not None:
            h = self.pe_encoder(h, self._positional_encoding(data), batch)
        edge_attr = None
        if self.bond_encoder is not None:  # each layer composes its edge map with it
            if getattr(data, "edge_attr", None) is None:
                raise GraphInputError(
                    f"this model reads {self.config.bond_dim} bond features (data.edge_attr), "
                    "which these graphs lack: featurize them as in training"
                )
            edge_attr = LinearEdgeEncoding(data.edge_attr, self.bond_encoder)
        for layer in self.layers:
            h = layer(h, data.edge_index, edge_attr, batch)
        return self.final_norm(h)

    def head_input(self, data: Data) -> Tensor:
        """``[B, readout.out_channels + mol_dim]``: each graph's pooled atom vectors, next
        to its standardised whole-molecule descriptors (clamped to ±6) when ``mol_dim``.
        A single ``Data`` (no ``batch``) is one graph; it is not modified."""
        batch = data.batch
        if batch is None:
            batch = torch.zeros(data.num_nodes, dtype=torch.long, device=data.x.device)
            num_graphs = 1
        elif hasattr(data, "num_graphs"):  # a PyG Batch
            num_graphs = int(data.num_graphs)
        else:  # a Data given a batch vector by hand
            num_graphs = int(batch.max()) + 1 if batch.numel() else 0
        pooled = self.readout(self.node_embeddings(data, batch), batch, num_graphs)
        if self.config.mol_dim:
            if getattr(data, "mol_x", None) is None:
                raise GraphInputError(
                    f"this model reads {self.config.mol_dim} whole-molecule descriptors "
                    "(data.mol_x), which these graphs lack: featurize them as in training, "
                    "e.g. MoleculeFeaturizer(descriptors=True)"
                )
            expected = (pooled.size(0), self.config.mol_dim)
            if tuple(data.mol_x.shape) != expected:
                raise GraphInputError(
                    f"data.mol_x must have shape [{expected[0]}, {expected[1]}] (one row of "
                    f"{expected[1]} whole-molecule descriptors per graph), got "
                    f"{list(data.mol_x.shape)}: featurize the graphs as in training"
                )
            scaled = ((data.mol_x - self.mol_mean) / self.mol_std).clamp(-6.0, 6.0)
            pooled = torch.cat([pooled, scaled], dim=-1)
        return pooled

    def forward(self, data: Data) -> Tensor:
        return self.head(self.head_input(data))


class MoleculeEnsemble(nn.Module):
    """The average prediction of several :class:`MoleculeModel` s of one architecture.

    The members' spread (:meth:`member_predictions`) flags molecules the models disagree
    on; it is not a calibrated error bar (see ``ensemble_spread`` in ``metrics.json``).

    Args:
        members: models trained from different initialisations (same config).

    Shapes:
        - input: data, as for :class:`MoleculeModel`
        - output: ``[num_graphs, T]``, the members' mean
    """

    def __init__(self, members: list[MoleculeModel]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.config = members[0].config

    def pe_transform(self) -> BaseTransform | None:
        """The members' positional-encoding transform (or None), as
        :meth:`MoleculeModel.pe_transform`."""
        return self.members[0].pe_transform()

    def set_mode(self, mode: str) -> None:
        """Switch every member's attention layers to ``sparse``, ``dense`` or ``auto``."""
        for member in self.members:
            member.set_mode(mode)

    def member_predictions(self, data: Data) -> Tensor:
        """Each member's prediction ``[M, B, T]``; :meth:`forward` is their mean."""
        return torch.stack([member(data) for member in self.members])

    def forward(self, data: Data) -> Tensor:
        return self.member_predictions(data).mean(0)
