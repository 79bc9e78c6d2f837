r"""Positional and structural node encodings, as plain functions and as PyG transforms.

* :func:`laplacian_pe` / :func:`laplacian_eigenpairs`: eigenvectors of the symmetric
  normalised Laplacian for its smallest non-trivial eigenvalues.
* :func:`random_walk_pe`: return (landing) probabilities of a random walk.
* :func:`sinusoidal_encoding`: the Transformer's sin/cos encoding of an integer position.

The transforms :class:`AddLaplacianPE`, :class:`AddRandomWalkPE` and :class:`AddSinusoidalPE`
compute one encoding per graph and store it as a node-level attribute of shape
:math:`[N, \cdot]`, so that :class:`torch_geometric.data.Batch` (and therefore
:class:`torch_geometric.loader.DataLoader`) concatenates it along the node dimension.

Convention (as in PyG): ``edge_index[0]`` holds the source and ``edge_index[1]`` the target of
an edge.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import eigsh
from threadpoolctl import threadpool_limits
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from graphattn.errors import GraphInputError, check_count, is_real
from graphattn.ops.graph import validate_edge_index

__all__ = [
    "DENSE_EIGH_MAX_NODES",
    "laplacian_eigenpairs",
    "laplacian_pe",
    "random_walk_pe",
    "sinusoidal_encoding",
    "AddLaplacianPE",
    "AddRandomWalkPE",
    "AddSinusoidalPE",
]

#: Graphs with at most this many nodes use a dense ``torch.linalg.eigh``; larger graphs use
#: ``scipy.sparse.linalg.eigsh`` (Lanczos) for the few eigenpairs needed.
DENSE_EIGH_MAX_NODES = 2000

# Entries of one dense block of the random-walk computation (32 MiB in float32).
_RW_BLOCK_ENTRIES = 1 << 23
# Random-walk vectors stay sparse until this fraction of their entries is non-zero.
_RW_DENSIFY_AT = 0.1
# Eigenvector entries closer than this in magnitude tie in the sign rule (unit vectors).
_SIGN_TIE = 1e-6


def _normalized_laplacian(edge_index: Tensor, num_nodes: int) -> sp.csr_matrix:
    r"""Float64 :math:`\mathbf{I} - \mathbf{D}^{-1/2}\mathbf{A}\mathbf{D}^{-1/2}` of the graph
    made undirected and simple, with :math:`\mathbf{D}^{-1/2}_{ii} = 0` for isolated nodes."""
    src, dst = edge_index.detach().cpu().numpy().astype(np.int64)
    keep = src != dst
    src, dst = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
    adj = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(num_nodes, num_nodes))
    adj.sum_duplicates()
    adj.data[:] = 1.0
    deg = np.asarray(adj.sum(axis=1)).ravel()
    inv_sqrt = np.zeros_like(deg)
    np.divide(1.0, np.sqrt(deg), out=inv_sqrt, where=deg > 0)
    scale = sp.diags(inv_sqrt)
    return (sp.identity(num_nodes, format="csr") - scale @ adj @ scale).tocsr()


def _smallest_eigenpairs(
    lap: sp.csr_matrix, count: int, dense_max_nodes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` smallest eigenpairs of ``lap`` (ascending, float64 numpy)."""
    n = lap.shape[0]
    if n <= dense_max_nodes or count >= n - 1:
        vals, vecs = torch.linalg.eigh(torch.from_numpy(lap.toarray()))
        return vals[:count].numpy(), vecs[:, :count].numpy()
    num_parts, part = connected_components(lap, directed=False)
    if num_parts > 1:
        return _eigenpairs_by_component(lap, count, dense_max_nodes, part, num_parts)
    return _lanczos_eigenpairs(lap, count)


def _eigenpairs_by_component(
    lap: sp.csr_matrix, count: int, dense_max_nodes: int, part: np.ndarray, num_parts: int
) -> tuple[np.ndarray, np.ndarray]:
    """Lanczos finds one vector per repeated eigenvalue, and the components of a graph
    repeat eigenvalues (0 once per component; identical components all of theirs): solve
    each component alone and keep the ``count`` smallest pairs of all."""
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(num_parts + 1))
    candidates = []  # (value, component, column, nodes, vector)
    for c in range(num_parts):
        nodes = order[bounds[c] : bounds[c + 1]]
        if nodes.size == 1:  # an isolated node: its own eigenvector, eigenvalue L_ii
            candidates.append((lap[nodes[0], nodes[0]], c, 0, nodes, np.ones(1)))
            continue
        sub = lap[nodes][:, nodes]
        vals, vecs = _smallest_eigenpairs(sub, min(count, nodes.size), dense_max_nodes)
        candidates += [(vals[j], c, j, nodes, vecs[:, j]) for j in range(vals.size)]
    chosen = sorted(candidates, key=lambda pair: pair[:3])[:count]
    vecs = np.zeros((lap.shape[0], len(chosen)))
    for column, (_, _, _, nodes, vector) in enumerate(chosen):
        vecs[nodes, column] = vector
    return np.array([pair[0] for pair in chosen], dtype=np.float64), vecs


def _lanczos_eigenpairs(lap: sp.csr_matrix, count: int) -> tuple[np.ndarray, np.ndarray]:
    n = lap.shape[0]
    start = np.random.default_rng(0).standard_normal(n)  # fixed: deterministic output
    ncv = min(n, max(2 * count + 1, 40))
    # ARPACK's many small BLAS calls run much slower with several (contended) BLAS threads.
    with threadpool_limits(limits=1, user_api="blas"):
        vals, vecs = eigsh(lap, k=count, which="SA", v0=start, ncv=ncv, tol=1e-6)
        # A connected graph's smallest eigenvalue is 0 and the next one is at least
        # 1 / (diameter * volume) > 1 / (2 n nnz) (Chung). Above that, Lanczos missed the
        # bottom of a tightly clustered spectrum (a long path or cycle); shift-invert around
        # a point just below 0 finds it: exact, but ~100x slower on a 22,000-node graph.
        if vals.min() > 1.0 / (2.0 * n * lap.nnz):
            vals, vecs = eigsh(lap.tocsc(), k=count, sigma=-1e-3, which="LM", v0=start)
    order = np.argsort(vals, kind="stable")
    return vals[order], vecs[:, order]


def _fix_signs(vecs: np.ndarray) -> np.ndarray:
    """Flip each column so that its entry of largest magnitude is positive.

    Symmetric nodes give entries of equal magnitude that differ in the last bits, so
    magnitudes within ``_SIGN_TIE`` of the largest count as ties. Where tied entries
    differ in sign (between nodes that need not be symmetric), the column's sum of
    cubes decides, which does not depend on the node order; where that is 0 too, the
    first tied entry does, and the sign follows the node order.
    """
    if vecs.size == 0:
        return vecs
    magnitude = np.abs(vecs)
    tied = magnitude >= magnitude.max(axis=0) - _SIGN_TIE
    rows = tied.argmax(axis=0)  # the first tied entry
    signs = np.where(vecs[rows, np.arange(vecs.shape[1])] < 0, -1.0, 1.0)
    both_signs = (tied & (vecs > 0)).any(axis=0) & (tied & (vecs < 0)).any(axis=0)
    skew = (vecs**3).sum(axis=0)
    by_skew = both_signs & (np.abs(skew) > _SIGN_TIE)
    return vecs * np.where(by_skew, np.sign(skew), signs)


def _check_dense_max_nodes(value: object) -> float:
    """``dense_max_nodes``: any number >= 0 (``math.inf``: always dense), else an error."""
    if not is_real(value) or not value >= 0:
        raise GraphInputError(f"dense_max_nodes must be a number >= 0, got {value!r}")
    return value


def laplacian_eigenpairs(
    edge_index: Tensor,
    num_nodes: int,
    k: int,
    dense_max_nodes: int = DENSE_EIGH_MAX_NODES,
) -> tuple[Tensor, Tensor]:
    r"""The :math:`k` smallest non-trivial eigenpairs of the normalised Laplacian.

    The graph is made undirected and simple (both directions of every edge, duplicates merged,
    self-loops dropped, unit weights), and

    .. math::
        \mathbf{L} = \mathbf{I} - \mathbf{D}^{-1/2} \mathbf{A} \mathbf{D}^{-1/2},

    with :math:`\mathbf{D}^{-1/2}_{ii} = 0` for an isolated node (so its row of
    :math:`\mathbf{L}` is :math:`\mathbf{e}_i^\top`: eigenvalue 1). With the eigenvalues sorted,
    :math:`\lambda_0 \le \lambda_1 \le \dots` (:math:`\lambda_0 = 0` as soon as there is an
    edge), the single pair :math:`(\lambda_0, \mathbf{v}_0)` is dropped and
    :math:`\lambda_1, \dots, \lambda_k` are returned.

    Disconnected graphs: exactly one eigenpair is dropped, whatever the number :math:`c` of
    components with edges. :math:`\lambda = 0` then has multiplicity :math:`c`, so the first
    :math:`c - 1` columns span the rest of the null space (spanned by the
    :math:`\sqrt{\text{degree}}`-weighted indicators of the components); they tell components
    apart. Within a repeated eigenvalue the basis is arbitrary (but deterministic).

    If :math:`N - 1 < k`, the missing columns of the eigenvectors and entries of the
    eigenvalues are zero. Each column is a unit vector whose sign is fixed so that its entry of
    largest magnitude is positive; where entries within 1e-6 of that magnitude differ in
    sign, the column's sum of cubes is made positive instead, and where that is 0 too
    (within 1e-6), the first of the tied entries is (the sign of an eigenvector is
    otherwise arbitrary; see :class:`~graphattn.nn.encodings.PositionalEncoder` for random
    sign flips in training). Of the sign rule, only that last case depends on the node order.

    Graphs with at most ``dense_max_nodes`` nodes use a dense :func:`torch.linalg.eigh`; larger
    ones :func:`scipy.sparse.linalg.eigsh` (Lanczos, ARPACK tolerance :math:`10^{-6}`, fixed
    start vector, one BLAS thread), both in float64. Lanczos finds a single vector per
    repeated eigenvalue, so a larger graph with several components is solved component
    by component (each with the same rule), and the :math:`k + 1` smallest pairs of all
    are kept. Where Lanczos misses a connected component's zero eigenvalue (a tightly
    clustered spectrum, as on long paths and cycles), shift-invert mode solves it again.
    Within a connected graph, Lanczos can still miss copies of a repeated eigenvalue and
    return larger eigenvalues in their place, without a warning: a 50 x 50 torus gave
    :math:`0.0039, 0.0039, 0.0079, \dots` for :math:`0.0039` four times, and a complete
    binary tree of 4,095 nodes lost a copy too. For graphs with such symmetries, pass a
    ``dense_max_nodes`` of at least :math:`N` (exact; 11 s for 4,095 nodes on one core).
    Looking for missed copies costs more than the solve (12x on a 22,470-node graph) and
    still missed the tree's, so it is not done.

    Args:
        edge_index (torch.Tensor): edges, integer tensor of shape :math:`[2, |\mathcal{E}|]`.
        num_nodes (int): number of nodes :math:`N`.
        k (int): number of eigenpairs :math:`k \ge 1`.
        dense_max_nodes (int, optional): largest :math:`N` solved densely (``math.inf``:
            every graph). (default: :obj:`DENSE_EIGH_MAX_NODES` = 2000)

    Returns:
        (torch.Tensor, torch.Tensor): eigenvalues of shape :math:`[k]` (ascending) and
        eigenvectors of shape :math:`[N, k]` (column :math:`c` belongs to eigenvalue
        :math:`c`), in the default float dtype, on the CPU.
    """
    num_nodes = check_count("num_nodes", num_nodes, least=0)
    _check_dense_max_nodes(dense_max_nodes)
    validate_edge_index(edge_index, num_nodes)
    k = check_count("k", k)
    dtype = torch.get_default_dtype()
    vals_out = torch.zeros(k, dtype=dtype)
    vecs_out = torch.zeros(num_nodes, k, dtype=dtype)
    found = min(k, num_nodes - 1)
    if found <= 0:
        return vals_out, vecs_out
    lap = _normalized_laplacian(edge_index, num_nodes)
    vals, vecs = _smallest_eigenpairs(lap, found + 1, dense_max_nodes)
    vals_out[:found] = torch.from_numpy(vals[1:]).to(dtype)
    vecs_out[:, :found] = torch.from_numpy(_fix_signs(vecs[:, 1:])).to(dtype)
    return vals_out, vecs_out


def laplacian_pe(
    edge_index: Tensor,
    num_nodes: int,
    k: int,
    dense_max_nodes: int = DENSE_EIGH_MAX_NODES,
) -> Tensor:
    r"""Laplacian positional encoding: the eigenvectors of :func:`laplacian_eigenpairs`.

    Row :math:`i` is :math:`(\mathbf{v}_1(i), \dots, \mathbf{v}_k(i))` for the eigenvectors of
    :math:`\mathbf{L} = \mathbf{I} - \mathbf{D}^{-1/2}\mathbf{A}\mathbf{D}^{-1/2}` (graph made
    undirected) with the :math:`k` smallest eigenvalues after the single smallest one, which is
    dropped (see :func:`laplacian_eigenpairs` for disconnected graphs); columns beyond
    :math:`N - 1` are zero.

    Args:
        edge_index (torch.Tensor): edges, integer tensor of shape :math:`[2, |\mathcal{E}|]`.
        num_nodes (int): number of nodes :math:`N`.
        k (int): encoding width :math:`k \ge 1`.
        dense_max_nodes (int, optional): largest :math:`N` solved with a dense eigensolver.
            (default: :obj:`DENSE_EIGH_MAX_NODES` = 2000)

    Returns:
        torch.Tensor: shape :math:`[N, k]`, default float dtype, on the CPU.
    """
    return laplacian_eigenpairs(edge_index, num_nodes, k, dense_max_nodes)[1]


def _propagate(
    matrix: sp.csr_matrix, vecs: sp.csr_matrix | np.ndarray
) -> sp.csr_matrix | np.ndarray:
    """``matrix @ vecs``, kept sparse while at most ``_RW_DENSIFY_AT`` of it is non-zero."""
    out = matrix @ vecs
    if sp.issparse(out) and out.nnz > _RW_DENSIFY_AT * out.shape[0] * out.shape[1]:
        return out.toarray()
    return out


def _column_dots(a: sp.csr_matrix | np.ndarray, b: sp.csr_matrix | np.ndarray) -> np.ndarray:
    r""":math:`\langle a_{:,j}, b_{:,j} \rangle` for every column :math:`j`, sparse or dense."""
    if sp.issparse(a):
        return np.asarray(a.multiply(b).sum(axis=0)).ravel()
    if sp.issparse(b):
        return np.asarray(b.multiply(a).sum(axis=0)).ravel()
    return np.einsum("vj,vj->j", a, b)


def _return_probabilities(
    fwd_op: sp.csr_matrix,
    bwd_op: sp.csr_matrix | None,
    cols: np.ndarray,
    k: int,
) -> np.ndarray:
    r"""Rows ``cols`` of the random-walk encoding, ``diag(M^t)`` for :math:`t = 1..k`.

    Uses :math:`(\mathbf{M}^t)_{jj} = \langle (\mathbf{M}^\top)^a \mathbf{e}_j,
    \mathbf{M}^b \mathbf{e}_j \rangle` with :math:`a = \lfloor t/2 \rfloor`, :math:`b = t - a`,
    so only powers up to :math:`\lceil k/2 \rceil` are needed; ``bwd_op`` is
    :math:`\mathbf{M}^\top`, or None when :math:`\mathbf{M}` is symmetric. The vectors start
    sparse (:math:`\mathbf{e}_j`) and become dense once they fill up.

    Returns:
        numpy.ndarray: shape ``[len(cols), k]``.
    """
    n, m = fwd_op.shape[0], cols.size
    unit = sp.csr_matrix((np.ones(m, fwd_op.dtype), (cols, np.arange(m))), shape=(n, m))
    fwd = bwd = unit
    out = np.zeros((m, k), dtype=fwd_op.dtype)
    for s in range(1, (k + 1) // 2 + 1):
        prev_bwd = bwd
        fwd = _propagate(fwd_op, fwd)
        bwd = fwd if bwd_op is None else _propagate(bwd_op, bwd)
        out[:, 2 * s - 2] = _column_dots(prev_bwd, fwd)  # t = 2s - 1
        if 2 * s <= k:
            out[:, 2 * s - 1] = _column_dots(bwd, fwd)  # t = 2s
    return out


def random_walk_pe(edge_index: Tensor, num_nodes: int, k: int) -> Tensor:
    r"""Random-walk structural encoding: return probabilities after :math:`1..k` steps.

    .. math::
        \mathrm{RW}_{i, t-1} = \big( (\mathbf{D}^{-1} \mathbf{A})^t \big)_{ii},
        \qquad t = 1, \dots, k,

    where :math:`\mathbf{A}_{ji} = 1` iff there is an edge :math:`j \to i` (duplicates merged,
    self-loops kept as a possible step) and :math:`\mathbf{D}` holds out-degrees: the walk
    moves along edge directions, picking an outgoing edge uniformly. Pass both directions of
    every edge for an undirected graph. A node without outgoing edges (e.g. isolated) gets
    zeros, as its row of :math:`\mathbf{P} = \mathbf{D}^{-1}\mathbf{A}` is zero.

    The diagonal is exact, computed in float32 on blocks of columns with :mod:`scipy.sparse`
    products, without forming :math:`\mathbf{P}^t`: :math:`(\mathbf{P}^t)_{ii} = \langle
    (\mathbf{P}^\top)^a \mathbf{e}_i, \mathbf{P}^{t-a} \mathbf{e}_i \rangle` with
    :math:`a = \lfloor t/2 \rfloor`. For a symmetric :math:`\mathbf{A}` it uses
    :math:`\mathbf{S} = \mathbf{D}^{-1/2}\mathbf{A}\mathbf{D}^{-1/2}` instead, which has the
    same diagonal powers (:math:`\mathbf{P}^t = \mathbf{D}^{-1/2}\mathbf{S}^t\mathbf{D}^{1/2}`)
    and is its own transpose. Cost at most :math:`O(\lceil k/2 \rceil \, |\mathcal{E}| \, N)`
    (twice that for a non-symmetric :math:`\mathbf{A}`), less while the walks stay local;
    memory :math:`O(|\mathcal{E}|)` plus a few dense blocks of :math:`2^{23}` entries.

    Args:
        edge_index (torch.Tensor): edges, integer tensor of shape :math:`[2, |\mathcal{E}|]`.
        num_nodes (int): number of nodes :math:`N`.
        k (int): number of steps :math:`k \ge 1`.

    Returns:
        torch.Tensor: shape :math:`[N, k]`, default float dtype, on the CPU.
    """
    num_nodes = check_count("num_nodes", num_nodes, least=0)
    validate_edge_index(edge_index, num_nodes)
    k = check_count("k", k)
    out = np.zeros((num_nodes, k), dtype=np.float32)
    if num_nodes > 0 and edge_index.numel() > 0:
        src, dst = edge_index.detach().cpu().numpy().astype(np.int64)
        adj = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(num_nodes, num_nodes))
        adj.sum_duplicates()
        adj.data[:] = 1.0
        deg = np.asarray(adj.sum(axis=1)).ravel()
        symmetric = (adj != adj.T).nnz == 0
        inv = np.zeros_like(deg)
        np.divide(1.0, np.sqrt(deg) if symmetric else deg, out=inv, where=deg > 0)
        if symmetric:
            fwd_op, bwd_op = (sp.diags(inv) @ adj @ sp.diags(inv)).astype(np.float32).tocsr(), None
        else:
            fwd_op = (sp.diags(inv) @ adj).astype(np.float32).tocsr()
            bwd_op = fwd_op.T.tocsr()
        block = max(1, min(num_nodes, _RW_BLOCK_ENTRIES // num_nodes))
        for start in range(0, num_nodes, block):
            cols = np.arange(start, min(num_nodes, start + block))
            out[cols] = _return_probabilities(fwd_op, bwd_op, cols, k)
    return torch.from_numpy(out).to(torch.get_default_dtype())


def sinusoidal_encoding(positions: Tensor, dim: int) -> Tensor:
    r"""The Transformer's sinusoidal encoding of integer positions.

    .. math::
        \mathrm{PE}_{p, 2m} = \sin\!\big(p / 10000^{2m/d}\big), \qquad
        \mathrm{PE}_{p, 2m+1} = \cos\!\big(p / 10000^{2m/d}\big),

    for :math:`m = 0, \dots, \lceil d/2 \rceil - 1`; an odd :math:`d` ends with a sine column.
    Angles are computed in float64.

    Args:
        positions (torch.Tensor): integer positions of shape :math:`[N]`.
        dim (int): encoding width :math:`d \ge 1`.

    Returns:
        torch.Tensor: shape :math:`[N, d]`, default float dtype, on the device of
        ``positions``.
    """
    if not isinstance(positions, Tensor) or positions.dim() != 1:
        shape = tuple(positions.shape) if isinstance(positions, Tensor) else type(positions)
        raise GraphInputError(f"positions must be a tensor of shape [N], got {shape}")
    if positions.dtype.is_floating_point or positions.dtype.is_complex:
        raise GraphInputError(f"positions must be an integer tensor, got {positions.dtype}")
    dim = check_count("dim", dim)
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim
    angles = positions.to(torch.float64)[:, None] * torch.pow(10000.0, -exponents)[None, :]
    out = torch.empty(positions.numel(), dim, dtype=torch.float64, device=positions.device)
    out[:, 0::2] = torch.sin(angles)
    out[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return out.to(torch.get_default_dtype())


def _graph_edges(data: Data) -> Tensor:
    edge_index = data.edge_index
    return edge_index if edge_index is not None else torch.empty(2, 0, dtype=torch.long)


class AddLaplacianPE(BaseTransform):
    r"""Store :func:`laplacian_pe` of a graph as ``data[attr_name]`` (shape :math:`[N, k]`).

    Args:
        k (int): number of eigenvectors :math:`k`.
        attr_name (str, optional): attribute to set. (default: :obj:`"lap_pe"`)
        dense_max_nodes (int, optional): largest graph solved with a dense eigensolver.
            (default: :obj:`DENSE_EIGH_MAX_NODES` = 2000)
    """

    def __init__(
        self, k: int, attr_name: str = "lap_pe", dense_max_nodes: int = DENSE_EIGH_MAX_NODES
    ) -> None:
        k = check_count("k", k)
        self.k = k
        self.attr_name = attr_name
        self.dense_max_nodes = _check_dense_max_nodes(dense_max_nodes)

    def forward(self, data: Data) -> Data:
        pe = laplacian_pe(_graph_edges(data), data.num_nodes, self.k, self.dense_max_nodes)
        data[self.attr_name] = pe
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(k={self.k}, attr_name={self.attr_name!r})"


class AddRandomWalkPE(BaseTransform):
    r"""Store :func:`random_walk_pe` of a graph as ``data[attr_name]`` (shape :math:`[N, k]`).

    Args:
        k (int): number of random-walk steps :math:`k`.
        attr_name (str, optional): attribute to set. (default: :obj:`"rw_pe"`)
    """

    def __init__(self, k: int, attr_name: str = "rw_pe") -> None:
        k = check_count("k", k)
        self.k = k
        self.attr_name = attr_name

    def forward(self, data: Data) -> Data:
        data[self.attr_name] = random_walk_pe(_graph_edges(data), data.num_nodes, self.k)
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(k={self.k}, attr_name={self.attr_name!r})"


class AddSinusoidalPE(BaseTransform):
    r"""Store :func:`sinusoidal_encoding` of node positions as ``data[attr_name]``.

    The positions are ``data[position_attr]`` (an integer tensor of shape :math:`[N]`) or,
    without ``position_attr``, the node indices :math:`0, \dots, N-1` of the graph (so they
    restart at 0 in every graph of a batch).

    Args:
        dim (int): encoding width :math:`d`.
        attr_name (str, optional): attribute to set, shape :math:`[N, d]`.
            (default: :obj:`"sin_pe"`)
        position_attr (str, optional): attribute holding the positions. (default: :obj:`None`)
    """

    def __init__(self, dim: int, attr_name: str = "sin_pe", position_attr: str | None = None):
        dim = check_count("dim", dim)
        self.dim = dim
        self.attr_name = attr_name
        self.position_attr = position_attr

    def forward(self, data: Data) -> Data:
        if self.position_attr is None:
            positions = torch.arange(data.num_nodes)
        else:
            positions = getattr(data, self.position_attr, None)
            if not isinstance(positions, Tensor) or positions.shape != (data.num_nodes,):
                got = (
                    tuple(positions.shape)
                    if isinstance(positions, Tensor)
                    else type(positions).__name__
                )
                raise GraphInputError(
                    f"data.{self.position_attr} must be a tensor of shape [{data.num_nodes}], "
                    f"got {got}"
                )
        data[self.attr_name] = sinusoidal_encoding(positions, self.dim)
        return data

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(dim={self.dim}, attr_name={self.attr_name!r}, "
            f"position_attr={self.position_attr!r})"
        )
