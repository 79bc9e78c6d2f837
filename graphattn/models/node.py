"""Per-node classification with edge-restricted attention (semi-supervised).

features -> input dropout -> linear -> L x GraphTransformerLayer -> norm -> dropout -> linear
-> logits

With ``label_inputs=True`` the model also reads the known training labels of the
nodes as an input (one-hot, zeros where unknown), as in masked label prediction
(UniMP, Shi et al. 2021): during training a random part of the training labels is
hidden from the input and only those hidden nodes are scored, so a node never sees its
own label; validation and test labels are never inputs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn

from graphattn.errors import GraphInputError, check_count
from graphattn.models.checks import check_architecture, check_attention_options
from graphattn.nn.dropout import Dropout
from graphattn.nn.transformer import GraphTransformerLayer, make_norm

__all__ = ["NodeClassifier", "NodeModelConfig"]


# Layer arguments set from NodeModelConfig's fields (the widths from ``hidden``).
NODE_LAYER_OPTIONS = ("channels", "in_channels", "out_channels", "heads", "dropout", "norm", "mode")


@dataclass
class NodeModelConfig:
    """Architecture of :class:`NodeClassifier` (saved in checkpoints as a dict).

    Attributes:
        in_channels: node feature width.
        num_classes: number of classes C.
        hidden: width inside the network, a multiple of ``heads``.
        layers: number of :class:`GraphTransformerLayer` blocks (0: none, a baseline that
            classifies each node from its own features).
        heads: attention heads.
        dropout: dropout inside layers and on the head input.
        input_dropout: dropout on the raw features.
        norm: ``layer``, ``batch`` or ``none``.
        mode: attention mode.
        label_inputs: feed known training labels as inputs (masked label prediction).
        attention: extra keyword arguments of :class:`GraphSelfAttention`.
    """

    in_channels: int
    num_classes: int
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    dropout: float = 0.2
    input_dropout: float = 0.2
    norm: str = "layer"
    mode: str = "sparse"
    label_inputs: bool = False
    attention: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.in_channels = check_count("in_channels", self.in_channels, least=0)
        self.num_classes = check_count("num_classes", self.num_classes)
        if "edge_dim" in self.attention:
            raise GraphInputError(
                f"attention={self.attention!r} sets edge_dim, but node models take no edge features"
            )
        check_architecture(
            self.hidden,
            self.layers,
            self.heads,
            dropout=self.dropout,
            input_dropout=self.input_dropout,
        )
        check_attention_options(self.attention, "NodeModelConfig", NODE_LAYER_OPTIONS)

    def to_dict(self) -> dict:
        """The fields as a plain dict (what checkpoints store)."""
        return asdict(self)


class NodeClassifier(nn.Module):
    """Logits ``[N, C]`` for every node of a graph.

    Args:
        config: a :class:`NodeModelConfig`.
    """

    def __init__(self, config: NodeModelConfig) -> None:
        super().__init__()
        c = config
        self.config = config
        self.input_dropout = Dropout(c.input_dropout)
        self.encoder = nn.Linear(c.in_channels, c.hidden)
        self.label_encoder = (
            nn.Linear(c.num_classes, c.hidden, bias=False) if c.label_inputs else None
        )
        self.layers = nn.ModuleList(
            GraphTransformerLayer(
                c.hidden, c.heads, dropout=c.dropout, norm=c.norm, mode=c.mode, **c.attention
            )
            for _ in range(c.layers)
        )
        self.norm = make_norm(c.norm, c.hidden)
        self.head = nn.Sequential(Dropout(c.dropout), nn.Linear(c.hidden, c.num_classes))

    def set_mode(self, mode: str) -> None:
        """Run every attention layer in ``mode`` (the weights are the same in each)."""
        for layer in self.layers:
            layer.mode = mode

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        known_labels: Tensor | None = None,
        batch: Tensor | None = None,
        return_attention: bool = False,
    ) -> Tensor | tuple[Tensor, list]:
        """Logits of every node.

        Args:
            x: ``[N, in_channels]``.
            edge_index: ``[2, E]``.
            known_labels: ``[N]`` long, class index of nodes whose label is an input,
                -1 elsewhere: needed with ``label_inputs``, refused without.
            batch: ``[N]`` graph index (several graphs at once).
            return_attention: also return each layer's ``(edge_index, alpha)``.

        Returns:
            ``[N, num_classes]`` logits, or ``(logits, [(edge_index, alpha [E', H]), ...])``
            with one pair per layer.
        """
        self._check_features(x)
        if known_labels is not None:
            self._check_known_labels(known_labels, x.size(0))
        elif self.label_encoder is not None:
            raise GraphInputError(
                "this model reads the known labels (label_inputs=True), and predicts "
                "otherwise without them: pass known_labels, the training labels with -1 "
                "elsewhere (train_node_model returns them as 'known_labels'; all -1 for "
                "none)"
            )
        h = self.encoder(self.input_dropout(x))
        if self.label_encoder is not None and known_labels is not None:
            one_hot = x.new_zeros(x.size(0), self.config.num_classes)
            known = known_labels >= 0
            one_hot[known, known_labels[known]] = 1.0
            h = h + self.label_encoder(one_hot)
        attentions = []
        for layer in self.layers:
            h = layer(h, edge_index, batch=batch, return_attention=return_attention)
            if return_attention:
                h, attention = h
                attentions.append(attention)
        logits = self.head(self.norm(h))
        return (logits, attentions) if return_attention else logits

    def _check_features(self, x: Tensor) -> None:
        width = self.config.in_channels
        if x.dim() != 2 or x.size(1) != width:
            raise GraphInputError(
                f"x must be [N, {width}] (the node features the model was built for, "
                f"in_channels={width}), got {list(x.shape)}"
            )

    def _check_known_labels(self, known_labels: Tensor, num_nodes: int) -> None:
        if self.label_encoder is None:
            raise GraphInputError(
                "known_labels given, but this model was built without label_inputs and "
                "would ignore them: build it with NodeModelConfig(label_inputs=True)"
            )
        if known_labels.dtype not in (torch.int64, torch.int32):
            raise GraphInputError(
                "known_labels must be an int64 (or int32) tensor of class indices (-1: "
                f"unknown), got {known_labels.dtype}"
            )
        if known_labels.shape != (num_nodes,):
            raise GraphInputError(
                f"known_labels must have shape [{num_nodes}], got {list(known_labels.shape)}"
            )
        if known_labels.numel() == 0:
            return
        low, high = torch.stack(torch.aminmax(known_labels)).tolist()  # one read, not two
        if low < -1 or high >= self.config.num_classes:
            raise GraphInputError(
                f"known_labels must be class indices 0..{self.config.num_classes - 1} or -1 "
                f"(unknown), got values from {low} to {high}"
            )
