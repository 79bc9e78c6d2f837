"""graphattn: graph neural networks built on edge-restricted multi-head self-attention."""

from graphattn.errors import GraphInputError, TrainingDiverged

__version__ = "0.1.0"
__all__ = ["GraphInputError", "TrainingDiverged", "__version__"]
