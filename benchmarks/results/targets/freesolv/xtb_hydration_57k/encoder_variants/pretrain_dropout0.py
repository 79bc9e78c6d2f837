"""Prototype (not part of graphattn): ``benchmarks/pretraining.py`` with dropout 0 in
the pretrained encoder (otherwise the recipe of ``xtb-hydration-57k``). From the
repository root:

    python PATH/pretrain_dropout0.py --targets xtb --corpus rdkit+chemicals \
        --data-dir ../shared/datasets --threads 2 --seeds 0 --datasets freesolv --out OUT \
        --xtb-labels benchmarks/results/targets/freesolv/pretraining_xtb/corpus.csv.gz \
        benchmarks/results/targets/freesolv/chedl_xtb_pretraining/chedl_labels.csv.gz
"""

import sys

sys.path.insert(0, "benchmarks")
import pretraining  # noqa: E402

pretraining.PRETRAIN["model"] = {"dropout": 0.0}
sys.exit(pretraining.main())
