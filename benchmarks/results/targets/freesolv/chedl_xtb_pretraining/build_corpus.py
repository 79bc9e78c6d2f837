import csv, gzip, random, chemicals, os
from rdkit import Chem, RDLogger
RDLogger.DisableLog("rdApp.*")
from graphattn.pretrained.xtb import corpus_molecule_ok
ELEM = {"C","N","O","S","P","F","Cl","Br","I","H"}
fs = [r["smiles"] for r in csv.DictReader(open("/work/shared/datasets/freesolv/SAMPL.csv"))]
fs_keys = {Chem.MolToInchiKey(Chem.MolFromSmiles(s)) for s in fs}
fs_max = max(Chem.MolFromSmiles(s).GetNumHeavyAtoms() for s in fs)
old = set()
with gzip.open("/work/main/benchmarks/results/targets/freesolv/pretraining_xtb/corpus.csv.gz","rt") as h:
    for r in csv.DictReader(h): old.add(Chem.MolToInchiKey(Chem.MolFromSmiles(r["smiles"])))
p = os.path.join(os.path.dirname(chemicals.__file__), "Identifiers", "chemical identifiers pubchem large.tsv")
kept, seen, n, stats = [], set(), 0, dict(unparsable=0, unlike=0, elements=0, big=0, freesolv=0, dup=0, old=0)
for line in open(p, encoding="utf-8"):
    f = line.rstrip("\n").split("\t"); n += 1
    m = Chem.MolFromSmiles(f[4]) if len(f) > 4 else None
    if m is None: stats["unparsable"] += 1; continue
    if not corpus_molecule_ok(m): stats["unlike"] += 1; continue
    if any(a.GetSymbol() not in ELEM for a in m.GetAtoms()) or not any(a.GetSymbol()=="C" for a in m.GetAtoms()): stats["elements"] += 1; continue
    if m.GetNumHeavyAtoms() > fs_max: stats["big"] += 1; continue
    k = Chem.MolToInchiKey(m)
    if k in fs_keys: stats["freesolv"] += 1; continue
    if k in old: stats["old"] += 1; continue
    if k in seen: stats["dup"] += 1; continue
    seen.add(k); kept.append(Chem.MolToSmiles(m))
random.Random(0).shuffle(kept)
print(n, len(kept), fs_max, stats)
open("/tmp/s18/chem/smiles.txt","w").write("\n".join(kept) + "\n")
