r"""Edge-restricted multi-head self-attention.

.. math::
    q_i = W_q x_i,\quad k_j = W_k x_j,\quad v_j = W_v x_j \qquad (\text{split into } H
    \text{ heads of width } d = C_{out}/H)

.. math::
    \alpha^h_{ij} = \operatorname{softmax}_{j \in \mathcal{N}(i)}
        \frac{q^h_i \cdot (k^h_j + e^h_{ij})}{\sqrt{d}}, \qquad
    x'_i = W_O \big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i)} \alpha^h_{ij}
        (v^h_j + e^h_{ij})

where :math:`\mathcal{N}(i)` are the sources of node i's incoming edges (plus i itself
with ``add_self_loops``), and :math:`e_{ij} = W_e\, \text{edge\_attr}_{ij}` is present
when ``edge_dim`` is set. Unconnected pairs get exactly zero weight.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graphattn.errors import GraphInputError, check_count, is_real
from graphattn.nn.edge_features import LinearEdgeEncoding
from graphattn.ops.attention import SCORES, dense_attention, reference_edge_attention
from graphattn.ops.compiled import numba_problem
from graphattn.ops.cost import choose_kernel, choose_mode
from graphattn.ops.dense import (
    DenseLayout,
    GraphSizes,
    UnsortedBatchError,
    dense_layout,
    dense_memory_bytes,
    graph_sizes,
)
from graphattn.ops.fused import edge_attention_weights, fused_edge_attention
from graphattn.ops.gather import gather_edge_attention
from graphattn.ops.graph import (
    ATTEND,
    EdgeSet,
    prepare_edges,
    validate_batch,
    validate_node_features,
)
from graphattn.ops.numba_attention import numba_edge_attention
from graphattn.ops.numba_attention import usable as numba_usable
from graphattn.ops.segment import NORMALIZERS

__all__ = ["DenseMemoryError", "GraphSelfAttention"]

MODES = ("sparse", "dense", "auto")
KERNELS = ("auto", "fused", "gather", "numba", "reference")
# The kernels that compute only plain softmax attention: dot scores, no hop bias.
PLAIN_SOFTMAX_KERNELS = ("fused", "gather", "numba")
DEFAULT_DENSE_BUDGET = 2 * 1024**3


class DenseMemoryError(GraphInputError, MemoryError):
    """Dense attention would need more memory than its budget allows."""


class GraphSelfAttention(nn.Module):
    r"""Multi-head self-attention restricted to a graph's edges (sparse or dense).

    Args:
        in_channels: width F of the input node features.
        out_channels: output width C; must be divisible by ``heads`` (head width C/H).
        heads: number of attention heads H.
        mode: ``"sparse"`` (edge list; memory O(E)), ``"dense"`` (padded N×N scores
            with an adjacency mask; memory O(B·L²), L the largest graph) or ``"auto"``
            (a cost model picks per call, see
            :func:`graphattn.nn.attention.GraphSelfAttention.resolve_mode`). Changeable
            at any time; the weights are shared by all modes.
        score: ``"dot"`` (scaled dot product) or ``"additive"`` (:math:`a_h \cdot
            \tanh(q_i + k_j)` with a learned :math:`a_h`, as in GAT).
        add_self_loops: let each node attend to itself (an existing loop is not doubled).
        dropout: dropout on the attention weights during training.
        edge_dim: width of edge features; they are projected to C, split per head, and
            added to the keys and the values of their edge.
        bias: learn additive biases in the projections.
        kernel: sparse kernel: ``"auto"`` (where they apply, the fused kernel on CUDA and
            on large CPU edge sets, the Numba kernel, else the gather kernel, on smaller
            ones, see :func:`graphattn.ops.cost.choose_kernel`; else the reference),
            ``"fused"`` (:mod:`graphattn.ops.fused`: no ``[E, H, D]`` state),
            ``"numba"`` (:mod:`graphattn.ops.numba_attention`: compiled loops over the
            CSR; CPU, float32/float64, needs Numba), ``"gather"``
            (:mod:`graphattn.ops.gather`: gather / softmax / scatter with a closed-form
            backward) or ``"reference"`` (the same with autograd; every option works).
            The fused, numba and gather kernels apply to ``score="dot"``,
            ``normalize="softmax"``, no attention dropout in training and no
            ``hop_bias``; forcing one with other settings is refused when a sparse or
            auto layer is built (attention dropout, and a dense layer called in sparse
            mode, when it runs). In dense mode, ``"reference"`` also runs the explicit
            computation instead of torch's fused attention, which has no gradients of
            gradients on CPU.
        normalize: ``"softmax"``, ``"relu"`` or ``"sigmoid"`` (see
            :func:`graphattn.ops.segment.segment_normalize`).
        max_dense_bytes: dense mode raises :class:`DenseMemoryError` instead of
            allocating more than this (estimated before allocation).
        hops: attend over all nodes within ``hops`` directed steps (truncated attention;
            1 is the plain edge restriction). ``hops > 1`` implies ``attend="khop"``.
            The k-hop pairs are built once per graph (cached).
        attend: ``"edges"`` (the input edges), ``"khop"`` (within ``hops``) or
            ``"global"`` (every pair inside each graph of the batch, never across graphs).
        hop_bias: add a learned per-head bias for each hop distance to the scores
            (a shortest-path bias as in Graphormer): distance 0 (self), 1..hops, and one
            bucket for farther pairs of global attention.

    Shapes:
        - input: x ``[N, F]``, edge_index ``[2, E]`` (row 0 sources j, row 1 targets i),
          edge_attr ``[E, edge_dim]``, batch ``[N]`` (graph of each node, sorted)
        - output: ``[N, C]``, or ``(out, (edge_index_used [2, E'], alpha [E', H]))``
          with ``return_attention=True``
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        heads: int = 4,
        mode: str = "sparse",
        score: str = "dot",
        add_self_loops: bool = True,
        dropout: float = 0.0,
        edge_dim: int | None = None,
        bias: bool = True,
        kernel: str = "auto",
        normalize: str = "softmax",
        max_dense_bytes: int = DEFAULT_DENSE_BUDGET,
        hops: int = 1,
        attend: str = "edges",
        hop_bias: bool = False,
    ) -> None:
        super().__init__()
        in_channels, out_channels, heads, hops = (
            check_count(name, value)
            for name, value in [
                ("in_channels", in_channels),
                ("out_channels", out_channels),
                ("heads", heads),
                ("hops", hops),
            ]
        )
        edge_dim = None if edge_dim in (None, 0) else check_count("edge_dim", edge_dim)  # 0: none
        check_heads_divide("out_channels", out_channels, heads)
        _check_choice("score", score, SCORES)
        _check_choice("kernel", kernel, KERNELS)
        _check_choice("normalize", normalize, NORMALIZERS)
        _check_choice("attend", attend, ATTEND)
        # dense mode does not use the kernel: a forced one is checked where it runs
        plain = _plain_softmax(score, normalize, bool(hop_bias))
        if kernel in PLAIN_SOFTMAX_KERNELS and mode != "dense" and not plain:
            raise GraphInputError(
                f"kernel={kernel!r} supports score='dot', normalize='softmax' and no hop_bias, "
                f"got score={score!r}, normalize={normalize!r}, hop_bias={hop_bias!r}; use "
                "kernel='auto' to fall back to the reference kernel"
            )
        if not is_real(dropout) or not 0 <= dropout < 1:
            raise GraphInputError(f"dropout must be at least 0 and below 1, got {dropout!r}")
        if not is_real(max_dense_bytes) or max_dense_bytes < 0:
            raise GraphInputError(f"max_dense_bytes must be a number >= 0, got {max_dense_bytes!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.head_dim = out_channels // heads
        self.mode = mode
        self.score = score
        self.add_self_loops = add_self_loops
        self.dropout = dropout
        self.edge_dim = edge_dim
        self.kernel = kernel
        self.normalize = normalize
        self.max_dense_bytes = max_dense_bytes
        self.hops = hops
        self.attend = "khop" if attend == "edges" and hops > 1 else attend

        self.lin_query = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_key = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_value = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_edge = nn.Linear(edge_dim, out_channels, bias=bias) if edge_dim else None
        self.lin_out = nn.Linear(out_channels, out_channels, bias=bias)
        self.score_vector = (
            nn.Parameter(torch.empty(heads, self.head_dim)) if score == "additive" else None
        )
        self.hop_embedding = nn.Embedding(hops + 2, heads) if hop_bias else None
        self.reset_parameters()

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        _check_choice("mode", value, MODES)
        self._mode = value

    def reset_parameters(self) -> None:
        for lin in (self.lin_query, self.lin_key, self.lin_value, self.lin_edge, self.lin_out):
            if lin is not None:
                lin.reset_parameters()
        if self.score_vector is not None:
            nn.init.normal_(self.score_vector, std=1.0 / math.sqrt(self.head_dim))
        if self.hop_embedding is not None:
            nn.init.zeros_(self.hop_embedding.weight)

    # ------------------------------------------------------------------ inputs
    def allowed_edges(self, edge_index: Tensor, num_nodes: int, batch: Tensor | None) -> EdgeSet:
        """The prepared set of (source -> target) pairs this layer attends over."""
        return prepare_edges(
            edge_index,
            num_nodes,
            add_self_loops=self.add_self_loops,
            attend=self.attend,
            hops=self.hops,
            batch=batch,
        )

    def _edge_terms(
        self, edges: EdgeSet, edge_attr: Tensor | LinearEdgeEncoding | None
    ) -> Tensor | None:
        """``[E', H, D]`` projected edge features on the prepared edges (or None)."""
        if self.lin_edge is None:
            if edge_attr is not None:
                raise GraphInputError(
                    "edge_attr given, but this layer was built without edge_dim and would "
                    "ignore it: build it with edge_dim=<edge feature width>, or pass none"
                )
            return None
        if edge_attr is None:
            raise GraphInputError(f"this layer has edge_dim={self.edge_dim}: pass edge_attr")
        if isinstance(edge_attr, LinearEdgeEncoding):
            if edge_attr.out_features != self.edge_dim:
                raise GraphInputError(
                    f"edge_attr encodes {edge_attr.out_features} features but this layer "
                    f"has edge_dim={self.edge_dim}"
                )
            terms = edge_attr.project(edges, self.lin_edge)
            return terms.view(-1, self.heads, self.head_dim)
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.unsqueeze(-1)
        if edge_attr.dim() != 2 or edge_attr.size(-1) != self.edge_dim:
            raise GraphInputError(
                f"edge_attr must have shape [E, {self.edge_dim}], got {list(edge_attr.shape)}"
            )
        # Project the E input edges, then carry them onto the prepared edges: the same as
        # projecting the merged features (merging averages, a linear map) on fewer rows.
        # The bias goes on after the merge, so that prepared pairs without an input edge
        # (added self-loops, k-hop pairs) get lin_edge(0) = bias as well.
        weight, bias = self.lin_edge.weight, self.lin_edge.bias
        merged = edges.merge_edge_features(F.linear(edge_attr.to(weight.dtype), weight))
        if bias is not None:  # in merged's dtype: under autocast, a float32 bias would
            merged = merged + bias.to(merged.dtype)  # make the terms wider than q
        return merged.view(-1, self.heads, self.head_dim)

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        shape = (x.size(0), self.heads, self.head_dim)
        return (
            self.lin_query(x).view(shape),
            self.lin_key(x).view(shape),
            self.lin_value(x).view(shape),
        )

    # ------------------------------------------------------------------ modes
    def dense_bytes(
        self,
        layout: DenseLayout | GraphSizes,
        dtype: torch.dtype = torch.float32,
        need_weights: bool = False,
    ) -> int:
        """Estimated bytes of dense mode's ``L x L`` tensors for this layout, counting
        the backward pass when autograd is on (see
        :func:`graphattn.ops.dense.dense_memory_bytes`)."""
        plain = _plain_softmax(self.score, self.normalize, self.hop_embedding is not None)
        fused = plain and self.lin_edge is None and self.kernel != "reference"
        return dense_memory_bytes(
            layout.num_graphs,
            layout.max_nodes,
            self.heads,
            self.head_dim,
            element_size=torch.finfo(dtype).bits // 8,
            edge_features=self.lin_edge is not None,
            additive=self.score == "additive",
            explicit=need_weights or not fused,
            backward=torch.is_grad_enabled(),
        )

    def resolve_mode(
        self,
        edges: EdgeSet,
        layout: DenseLayout | GraphSizes,
        device: torch.device,
        dtype: torch.dtype = torch.float32,
        need_weights: bool = False,
    ) -> str:
        """Pick ``"sparse"`` or ``"dense"`` for ``mode="auto"``.

        Rule (see :mod:`graphattn.ops.cost`): dense only if its estimated memory fits
        ``max_dense_bytes``, the fraction of allowed pairs among the padded ``B·L²``
        pairs is at least the device's crossover density, and (on a GPU) the sparse
        work is large enough for per-pair costs rather than fixed costs to decide.
        ``dtype`` is that of the inputs and ``need_weights`` whether the call returns
        the attention weights; both change the dense memory estimate.
        """
        return choose_mode(
            num_edges=edges.num_edges,
            num_graphs=layout.num_graphs,
            max_nodes=layout.max_nodes,
            dense_bytes=self.dense_bytes(layout, dtype, need_weights),
            max_dense_bytes=self.max_dense_bytes,
            device=device,
            channels=self.heads * self.head_dim,
        )

    def _check_dense_budget(
        self, layout: DenseLayout, dtype: torch.dtype, need_weights: bool
    ) -> None:
        needed = self.dense_bytes(layout, dtype, need_weights)
        if needed > self.max_dense_bytes:
            raise DenseMemoryError(
                f"dense attention needs about {needed:,} bytes for {layout.num_graphs} "
                f"graph(s) of up to N={layout.max_nodes} nodes with {self.heads} heads "
                f"(budget max_dense_bytes={self.max_dense_bytes:,}); use mode='sparse' "
                "(on the command line: --mode sparse)"
            )

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        edge_attr: Tensor | LinearEdgeEncoding | None = None,
        batch: Tensor | None = None,
        return_attention: bool = False,
        mode: str | None = None,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """Attend over the allowed edges.

        Args:
            x: ``[N, in_channels]`` node features.
            edge_index: ``[2, E]`` long; sources in row 0, targets in row 1.
            edge_attr: ``[E, edge_dim]`` edge features (needed iff ``edge_dim`` is set),
                or a :class:`~graphattn.nn.edge_features.LinearEdgeEncoding` of raw ones
                (the same result, fewer operations).
            batch: ``[N]`` graph index of each node, needed for a batch of several graphs
                by dense mode and by ``attend="global"`` (without it, a batch is one
                graph, and global attention would cross graphs).
            return_attention: also return the used edges and their weights.
            mode: override ``self.mode`` for this call.

        Returns:
            ``[N, out_channels]``, or ``(out, (edge_index_used, alpha [E', H]))``.
        """
        plain_edge_attr = edge_attr if isinstance(edge_attr, Tensor) else None
        validate_node_features(x, self.in_channels, plain_edge_attr)
        if batch is not None:  # sparse mode does not read it, but a wrong one is a mistake
            validate_batch(batch, x.size(0), check_ids=False)
        edges = self.allowed_edges(edge_index, x.size(0), batch)
        edge_terms = self._edge_terms(edges, edge_attr)
        q, k, v = self._project(x)
        mode = self.mode if mode is None else mode
        _check_choice("mode", mode, MODES)
        layout = None
        if mode == "auto":
            sizes = graph_sizes(x.size(0), batch)
            mode = self.resolve_mode(edges, sizes, x.device, x.dtype, return_attention)
            if mode == "dense":
                try:
                    layout = dense_layout(x.size(0), batch, x.device)
                except UnsortedBatchError:  # only sparse mode runs it
                    layout, mode = None, "sparse"
                if layout is not None and layout.crossing_edge(edges) is not None:
                    mode = "sparse"  # edges between graphs: only sparse mode has them
        if mode == "dense":
            layout = layout or dense_layout(x.size(0), batch, x.device)
            out, alpha = self._dense(q, k, v, edges, edge_terms, layout, return_attention)
        else:
            out, alpha = self._sparse(q, k, v, edges, edge_terms, return_attention)
        out = self.lin_out(out.reshape(-1, self.out_channels))
        if return_attention:
            return out, (edges.edge_index, alpha)
        return out

    def attention_matrix(
        self,
        x: Tensor,
        edge_index: Tensor,
        *,
        edge_attr: Tensor | LinearEdgeEncoding | None = None,
        batch: Tensor | None = None,
        mode: str | None = None,
        num_graphs: int | None = None,
    ) -> Tensor:
        """Attention weights as a dense ``[num_graphs, H, N_max, N_max]`` tensor.

        Entry ``[b, h, i, j]`` is the weight target i of graph b gives source j in head
        h; exactly 0 where j -> i is not an allowed edge. The arguments are those of
        :meth:`forward`; all but ``x`` and ``edge_index`` are passed by name.
        ``num_graphs`` (default: the largest id in ``batch`` + 1) also counts graphs
        without nodes at the end of a batch: pass ``batch.num_graphs`` of a PyG
        ``Batch`` to get one block per graph.
        """
        _, (used, alpha) = self.forward(
            x, edge_index, edge_attr, batch, return_attention=True, mode=mode
        )
        layout = dense_layout(x.size(0), batch, x.device, num_graphs)
        edges = self.allowed_edges(edge_index, x.size(0), batch)
        e = layout.crossing_edge(edges)
        if e is not None:  # sparse mode ran it; only the per-graph blocks cannot hold it
            src, dst = int(edges.edge_index[0, e]), int(edges.edge_index[1, e])
            raise GraphInputError(
                f"attention_matrix has one block per graph, and the edge source {src} -> "
                f"target {dst} connects graphs {int(batch[src])} and {int(batch[dst])}; "
                "forward(..., return_attention=True) gives the weights of every edge"
            )
        return layout.edges_to_dense(alpha, edges).permute(0, 3, 1, 2)

    # ------------------------------------------------------------------ kernels
    def sparse_kernel(
        self,
        edges: EdgeSet,
        edge_terms: bool,
        device: torch.device,
        dtype: torch.dtype = torch.float32,
    ) -> str:
        """The sparse kernel a call runs: ``"fused"``, ``"numba"``, ``"gather"`` or
        ``"reference"``."""
        plain = _plain_softmax(self.score, self.normalize, self.hop_embedding is not None)
        applies = plain and (self.dropout == 0.0 or not self.training)
        if self.kernel in PLAIN_SOFTMAX_KERNELS and not applies:
            raise GraphInputError(
                f"kernel={self.kernel!r} supports score='dot', normalize='softmax', no "
                "hop_bias and no attention dropout in training; use kernel='auto' to fall "
                "back to the reference kernel"
            )
        if self.kernel == "numba" and not numba_usable(device, dtype):
            problem = numba_problem()
            raise GraphInputError(
                "kernel='numba' needs float32 or float64 tensors on the CPU and a usable "
                f"Numba, got {dtype} on {device}"
                + (f" ({problem})" if problem else "")
                + "; use kernel='auto'"
            )
        if edges.num_edges == 0:
            # Every output is zero, tied to q, k and v so that backward reaches the
            # projections (DDP must not see unused parameters); every kernel hands an
            # empty edge set to the reference kernel for that, so go there directly.
            return "reference"
        if self.kernel != "auto":
            return self.kernel
        if not applies or torch.compiler.is_compiling():
            # torch.compile cannot trace the Numba and Triton kernels' calls (nor the
            # custom autograd functions around them); the reference kernel is plain torch
            return "reference"
        size = (edges.num_edges, self.heads, self.head_dim)
        numba = numba_usable(device, dtype)
        return choose_kernel(*size, edge_terms, device, edges.num_nodes, numba=numba)

    def _sparse(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        edges: EdgeSet,
        edge_terms: Tensor | None,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        kernel = self.sparse_kernel(edges, edge_terms is not None, q.device, q.dtype)
        if kernel == "fused":
            out, lse = fused_edge_attention(q, k, v, edges, None, edge_terms, edge_terms)
            alpha = (
                edge_attention_weights(q, k, edges, lse, None, edge_terms) if need_weights else None
            )
            return out, alpha
        if kernel == "numba":
            return numba_edge_attention(q, k, v, edges, None, edge_terms, edge_terms)
        if kernel == "gather":
            return gather_edge_attention(q, k, v, edges, None, edge_terms, edge_terms)
        return reference_edge_attention(
            q,
            k,
            v,
            edges,
            edge_key=edge_terms,
            edge_value=edge_terms,
            score_bias=self._score_bias(edges),
            **self._kernel_options(),
        )

    def _dense(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        edges: EdgeSet,
        edge_terms: Tensor | None,
        layout: DenseLayout,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        self._check_dense_budget(layout, q.dtype, need_weights)
        mask = layout.edge_mask(edges)
        heads_first = (0, 2, 1, 3)  # [B, L, H, D] -> [B, H, L, D]
        qd, kd, vd = (layout.to_dense(t).permute(heads_first) for t in (q, k, v))
        dense_terms = None
        if edge_terms is not None:
            dense_terms = layout.edges_to_dense(edge_terms, edges).permute(0, 3, 1, 2, 4)
        bias = self._score_bias(edges)
        if bias is not None:
            bias = layout.edges_to_dense(bias, edges).permute(0, 3, 1, 2)
        out, weights = dense_attention(
            qd,
            kd,
            vd,
            mask,
            edge_key=dense_terms,
            edge_value=dense_terms,
            score_bias=bias,
            need_weights=need_weights,
            allow_fused=self.kernel != "reference",  # its gradients have gradients
            **self._kernel_options(),
        )
        out = layout.to_nodes(out.permute(heads_first))
        if weights is None:
            return out, None
        b, i, j = layout.edge_coordinates(edges)
        return out, weights[b, :, i, j]

    def _kernel_options(self) -> dict:
        """Keyword arguments shared by the reference and the dense kernels."""
        return {
            "score": self.score,
            "score_vector": self.score_vector,
            "normalize": self.normalize,
            "dropout": self.dropout,
            "training": self.training,
        }

    def _score_bias(self, edges: EdgeSet) -> Tensor | None:
        """``[E', H]`` learned hop-distance bias per allowed pair (or None)."""
        if self.hop_embedding is None:
            return None
        return self.hop_embedding(edges.hop_distance.clamp(max=self.hops + 1))

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, heads={self.heads}, mode={self.mode!r}, "
            f"score={self.score!r}, normalize={self.normalize!r}, edge_dim={self.edge_dim}, "
            f"attend={self.attend!r}, hops={self.hops}"
        )


def _plain_softmax(score: str, normalize: str, hop_bias: bool) -> bool:
    """Whether the attention is what the fused, numba and gather kernels compute: dot
    scores and a softmax, without a hop bias (a score term only the reference kernel
    adds)."""
    return score == "dot" and normalize == "softmax" and not hop_bias


def check_heads_divide(name: str, channels: int, heads: int) -> None:
    """Raise unless ``channels`` (the width called ``name``) and ``heads`` are integers
    >= 1 and the width splits into that many heads."""
    channels, heads = check_count(name, channels), check_count("heads", heads)
    if channels % heads:
        raise GraphInputError(f"{name} ({channels}) must be a multiple of heads ({heads})")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise GraphInputError(f"{name} must be one of {choices}, got {value!r}")
