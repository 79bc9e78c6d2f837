"""Prototype (not part of graphattn): ``benchmarks/pretraining.py`` with a 128-wide
encoder at learning rate 3e-4 (at 1e-3 a 128-wide encoder did not train on the smaller
corpus). Run as ``pretrain_dropout0.py``.
"""

import sys

sys.path.insert(0, "benchmarks")
import pretraining  # noqa: E402

pretraining.PRETRAIN["model"] = {"hidden": 128}
pretraining.PRETRAIN["lr"] = 3e-4
sys.exit(pretraining.main())
