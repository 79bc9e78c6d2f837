import sys, time, os
os.environ.setdefault("OMP_NUM_THREADS", "1")
from multiprocessing import Pool
from graphattn.pretrained.xtb import xtb_hydration_energies, PLAUSIBLE_KCAL
from graphattn.featurize.molecule import parse_smiles
M = [("GFN2-xTB", "alpb")]
def lab(s):
    try:
        v = xtb_hydration_energies(parse_smiles(s), M)[M[0]]
    except (ValueError, RuntimeError):
        return s, None
    return s, (v if abs(v) < PLAUSIBLE_KCAL else None)
if __name__ == "__main__":
    start, stop, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    smiles = open("/tmp/s18/chem/smiles.txt").read().split()[start:stop]
    t = time.time(); done = 0
    with Pool(2) as pool, open(out, "a") as h:
        for s, v in pool.imap(lab, smiles, chunksize=4):
            h.write(f"{s},{'' if v is None else f'{v:.4f}'}\n"); done += 1
            if done % 500 == 0: h.flush(); print(done, round(time.time()-t), flush=True)
    print("done", done, round(time.time() - t), flush=True)
