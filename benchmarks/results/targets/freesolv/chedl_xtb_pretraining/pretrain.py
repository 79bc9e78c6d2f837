import csv, gzip, sys, logging, torch
sys.path.insert(0, "/work/main/benchmarks")
logging.basicConfig(level=logging.INFO)
from graphattn.datasets.molecules import MoleculeCSV, dataset_featurizer
from graphattn.featurize.molecule import MoleculeFeaturizer
from graphattn.train.molecules import MoleculeTrainConfig, train_molecule_model
from pretraining import PRETRAIN
if __name__ == "__main__":
    epochs, out, use_new = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    torch.set_num_threads(2)
    rows = []
    with gzip.open("/work/main/benchmarks/results/targets/freesolv/pretraining_xtb/corpus.csv.gz", "rt") as h:
        rows += [(r["smiles"], r["xtb_hydration"]) for r in csv.DictReader(h)]
    n_old = len(rows)
    if use_new:
        for line in open("/tmp/s18/chem/labels.csv"):
            s, v = line.rstrip("\n").rsplit(",", 1)
            if v: rows.append((s, v))
    import os; os.makedirs(out, exist_ok=True)
    with open(out + "/corpus.csv", "w", newline="") as h:
        w = csv.writer(h); w.writerow(["smiles", "xtb_hydration"]); w.writerows(rows)
    print("old", n_old, "total", len(rows), flush=True)
    settings = {**dataset_featurizer("freesolv").to_dict(), "descriptors": False}
    ds = MoleculeCSV(out + "/corpus.csv", target_cols=["xtb_hydration"], featurizer=MoleculeFeaturizer.from_dict(settings))
    cfg = MoleculeTrainConfig(**{**PRETRAIN, "epochs": epochs, "seed": 0})
    m = train_molecule_model(ds, cfg, run_dir=out + "/pretrained", dataset_name="xtb", progress=False)
    print("pretrained", len(ds), m["train_seconds"], m["val"]["rmse"], m["epochs_run"], flush=True)
