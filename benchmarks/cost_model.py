"""The compiler's analytic estimate (``compiler.backend.vta.default``) against the cycle model
(``sim.cycles_of``), on the zoo's ResNet-18 layers and on C2-C12 (``benchmarks/vta_layers.py``'s
epilogue): per layer, the cycle-model cycles of the analytic default config (what the estimate's
ranking picks, nothing measured), of the shipped tuned config, and the estimate's error and rank
correlation over configs drawn at random (fixed seed) from those that lower.

    .venv/bin/python benchmarks/cost_model.py [--samples 12] [--seed 0] [--sets network,vta]
    git show REV:compiler/backend/vta/default.py > /tmp/old_default.py
    .venv/bin/python benchmarks/cost_model.py --baseline /tmp/old_default.py

``--baseline FILE``: another version of ``default.py`` (its ``default_config`` and
``estimate_cycles``), costed on the same configs in the same run, side by side. Issue 19 (one cost
model): the default configs no slower on the cycle model than the baseline's, the error smaller.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time

import numpy as np
from scipy.stats import spearmanr

from pyvta import sim
from pyvta.compiler.backend.vta import Epilogue, lower_conv2d
from pyvta.compiler.backend.vta import default as current
from pyvta.compiler.backend.vta.config import FitError, fitting_configs
from pyvta.compiler.backend.vta.conv2d import DramMap
from pyvta.compiler.backend.vta.workload import resnet18_workload
from pyvta.compiler.workloads import VTA_LAYERS
from pyvta.isa import HwConfig

VTA_LAYERS_EPILOGUE = Epilogue(bias=True, shift=8, lo=0, hi=127, bias_via_gemm=True)


def _cycles(wl, ep, c, hw) -> int | None:
    try:
        low = lower_conv2d(wl, ep, c, hw, DramMap.disjoint(wl, hw))
    except FitError:
        return None
    return sim.cycles_of(low.insns, hw).total_cycles


def _sample(wl, ep, hw, n: int, rng) -> list[tuple[object, int]]:
    """(config, cycle-model cycles) of ``n`` random configs that lower."""
    fitting = fitting_configs(wl, ep, hw)
    out = []
    for i in rng.permutation(len(fitting)):
        cycles = _cycles(wl, ep, fitting[i], hw)
        if cycles is not None:
            out.append((fitting[i], cycles))
        if len(out) == n:
            break
    return out


def _load_module(path: str):
    spec = importlib.util.spec_from_file_location("baseline_default", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def _layers(sets: list[str]) -> list[tuple[str, object, Epilogue, int, object]]:
    """(name, workload, epilogue, launches per inference, tuned config or None)."""
    out = []
    if "network" in sets:
        from pyvta.compiler.graph.zoo import save_model
        from pyvta.tuner.network import network_configs, network_layers, pretuned_log

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "resnet18.onnx")
            save_model("resnet18", path, size=224)
            layers = network_layers(path, progress=None)
        tuned = network_configs(str(pretuned_log("resnet18_224")), layers)
        for i, la in enumerate(layers):
            name = f"R{i}" + ("+res" if la.epilogue.residual else "")
            out.append(
                (name, la.workload, la.epilogue, la.count, tuned.get((la.workload, la.epilogue)))
            )
    if "vta" in sets:
        for name in VTA_LAYERS:
            out.append((name, resnet18_workload(name), VTA_LAYERS_EPILOGUE, 1, None))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=12, help="random configs per layer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sets", default="network,vta", help="network (the zoo's ResNet-18), vta")
    ap.add_argument("--baseline", metavar="FILE", help="another default.py to compare with")
    args = ap.parse_args()
    hw = HwConfig()
    models = {"new": current} | ({"base": _load_module(args.baseline)} if args.baseline else {})
    t0 = time.perf_counter()
    head = f"{'layer':8s} {'workload':34s} {'n':>2s} | {'tuned':>8s} |"
    for m in models:
        head += f" {'default ' + m:>12s} {'err':>6s} {'worst':>6s} {'rho':>5s} |"
    print(f"{args.samples} random lowering configs per layer, seed {args.seed}; config {hw.tag}")
    print(head + "\n" + "-" * len(head))
    totals: dict[str, dict[str, float]] = {}
    errs: dict[str, list[float]] = {m: [] for m in models}
    rhos: dict[str, list[float]] = {m: [] for m in models}
    for name, wl, ep, count, tuned in _layers(args.sets.split(",")):
        group = totals.setdefault("network" if name.startswith("R") else "vta", {})
        tuned_cycles = _cycles(wl, ep, tuned, hw) if tuned is not None else None
        if tuned_cycles:
            group["tuned"] = group.get("tuned", 0) + count * tuned_cycles
        line = f"{name:8s} {str(wl):34s} {count:2d} | {tuned_cycles or 0:8d} |"
        samples = _sample(wl, ep, hw, args.samples, np.random.default_rng(args.seed))
        cycles = np.array([s[1] for s in samples], float)
        for m, mod in models.items():
            default = _cycles(wl, ep, mod.default_config(wl, ep, hw), hw)
            group[m] = group.get(m, 0) + count * default
            est = np.array([mod.estimate_cycles(wl, ep, c, hw) for c, _ in samples])
            rel = np.abs(est - cycles) / cycles
            rho = spearmanr(est, cycles).statistic
            errs[m].append(rel.mean())
            rhos[m].append(rho)
            line += f" {default:12d} {100 * rel.mean():5.1f}% {100 * rel.max():5.1f}% {rho:5.2f} |"
        print(line, flush=True)
    print("-" * len(head))
    for group, t in totals.items():
        parts = [f"default ({m}) {t[m] / 1e6:.3f} M" for m in models]
        if "tuned" in t:
            parts.append(f"shipped tuned {t['tuned'] / 1e6:.3f} M")
        print(f"{group}: cycles with " + "; ".join(parts))
    for m in models:
        print(
            f"estimate ({m}) vs cycle model: mean error {100 * np.mean(errs[m]):.1f}%,"
            f" mean Spearman rho {np.mean(rhos[m]):.3f} over {len(errs[m])} layers"
        )
    print(f"(wall time {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
