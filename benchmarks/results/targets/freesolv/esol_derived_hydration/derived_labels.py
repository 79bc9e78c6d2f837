"""Prototype (not part of graphattn): hydration free energies derived from ESOL's
measured aqueous solubilities and tabulated vapour pressures.

The air-water partition coefficient of a compound is the ratio of its saturated
concentrations in water and in the gas: K_wa = S * R * T / p_sat, so its hydration free
energy is dG = -R T ln(K_wa) (standard states of 1 mol/L in both phases, as FreeSolv's).
S comes from ESOL (log mol/L), p_sat at 25 C from the vapour-pressure tables of
``chemicals``, evaluated by ``thermo.VaporPressure``. For a compound that is solid at
25 C (melting point above it, from ``chemicals``), the tables give the vapour pressure
of the subcooled liquid; it is scaled to the solid's with Walden's rule for the entropy
of fusion (56.5 J/mol/K).

Each ESOL molecule is matched to a CAS number by InChIKey (``chemicals.identifiers``);
``in_freesolv`` marks those whose InChIKey connectivity block is one of FreeSolv's 642,
and ``freesolv_expt`` gives FreeSolv's measured value for them, so the derivation can be
checked against experiment. ``in_range`` says whether 25 C lies within the range of the
vapour-pressure fit used.

Needs chemicals, thermo and rdkit, which graphattn does not depend on, so it runs in an
environment of its own:

    python -m venv /tmp/chemvenv
    /tmp/chemvenv/bin/pip install chemicals==1.5.2 thermo==0.6.1 rdkit==2026.9.1
    /tmp/chemvenv/bin/python derived_labels.py --data-dir ../shared/datasets \
        --out /tmp/esol_derived_hydration.csv

The output is derived from ESOL, so it is not kept in the repository.
"""

import argparse
import csv
import math
from pathlib import Path

from chemicals.identifiers import search_chemical
from chemicals.phase_change import Tm as melting_point
from rdkit import Chem, RDLogger
from thermo import VaporPressure

T = 298.15
R = 8.314462618  # J/(mol K)
RT_KCAL = 0.0019872036 * T
WALDEN_ENTROPY = 56.5  # J/(mol K), entropy of fusion of a typical rigid organic solid

RDLogger.DisableLog("rdApp.*")


def connectivity(mol: Chem.Mol) -> str:
    return Chem.MolToInchiKey(mol)[:14]


def vapour_pressure(cas: str) -> tuple[float, str, bool] | None:
    """(p_sat at T in Pa, method, whether T is inside the method's range), or None."""
    try:
        curve = VaporPressure(CASRN=cas)
    except Exception:  # thermo raises assorted errors on incomplete records
        return None
    method = curve.method  # thermo's own choice among the tables it has for this CAS
    if method is None:
        return None
    pressure = curve(T)  # extrapolated by thermo outside the method's range
    if not pressure or pressure <= 0:
        return None
    low, high = curve.T_limits[method]
    inside = low <= T <= high
    return pressure, method, bool(inside)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    data = Path(args.data_dir)
    with open(data / "freesolv" / "SAMPL.csv", newline="") as handle:
        freesolv = {
            connectivity(Chem.MolFromSmiles(r["smiles"])): float(r["expt"])
            for r in csv.DictReader(handle)
        }
    rows, counts = [], {"esol": 0, "unparsable": 0, "no_cas": 0, "no_vapour_pressure": 0}
    with open(data / "esol" / "delaney-processed.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            counts["esol"] += 1
            smiles = row["smiles"].strip()
            mol = Chem.MolFromSmiles(smiles)
            if mol is None:
                counts["unparsable"] += 1
                continue
            try:
                cas = search_chemical("InChIKey=" + Chem.MolToInchiKey(mol)).CASs
            except Exception:  # chemicals raises a bare Exception when it finds nothing
                counts["no_cas"] += 1
                continue
            found = vapour_pressure(cas)
            if found is None:
                counts["no_vapour_pressure"] += 1
                continue
            pressure, method, in_range = found
            tm = melting_point(cas)
            solid = bool(tm and tm > T)
            if solid:
                pressure *= math.exp(-WALDEN_ENTROPY / R * (tm / T - 1.0))
            log_s = float(row["measured log solubility in mols per litre"])
            k_wa = 10.0**log_s * 1000.0 * R * T / pressure  # mol/L -> mol/m^3
            key = connectivity(mol)
            rows.append(
                {
                    "smiles": smiles,
                    "cas": cas,
                    "dg_derived": round(-RT_KCAL * math.log(k_wa), 3),
                    "solid": int(solid),
                    "method": method,
                    "in_range": int(in_range),
                    "in_freesolv": int(key in freesolv),
                    "freesolv_expt": freesolv.get(key, ""),
                }
            )
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(counts, "labelled", len(rows), "in FreeSolv", sum(r["in_freesolv"] for r in rows))
    for name, keep in [
        ("all", lambda r: True),
        ("liquid", lambda r: not r["solid"]),
        ("solid", lambda r: r["solid"]),
        ("liquid, in range", lambda r: not r["solid"] and r["in_range"]),
    ]:
        both = [r for r in rows if r["in_freesolv"] and keep(r)]
        errors = [r["dg_derived"] - r["freesolv_expt"] for r in both]
        rmse = math.sqrt(sum(e * e for e in errors) / len(errors))
        bias = sum(errors) / len(errors)
        new = sum(1 for r in rows if not r["in_freesolv"] and keep(r))
        print(f"{name}: against FreeSolv on {len(both)}: RMSE {rmse:.3f}, bias {bias:+.3f}")
        print(f"    not in FreeSolv: {new}")


if __name__ == "__main__":
    main()
