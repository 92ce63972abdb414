"""How a search comparison is summed up (``benchmarks/tune_search.py``): the table of trials to
95% of the best per layer, random search's trials estimated from its samples, and the sittings
kept as JSON (``--summary``) summed up again (``--from-summaries``), a layer's several sittings
combined by **the rule**: the geometric mean of their ratios, then over the layers."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import geometric_mean


def _estimate_table(rows: dict, names, trials: int, key: str, what: str) -> list[str]:
    """Lines of a table: per layer random's median trials to 95% estimated (``key`` of the
    rows: ``_sampled_random_trials``; no trials cap) and est. / each tuner's median; a geomean."""
    sampled = {k: m for k, m in rows.items() if key in m}
    if not sampled:
        return []
    out = ["", f"random's median trials to 95% estimated from {what}:"]
    out += ["| layer | random (est.) | " + " | ".join(f"est./{n}" for n in names) + " |"]
    out.append("|" + "---|" * (2 + len(names)))
    ratios = {n: [] for n in names}
    for layer, med in sampled.items():
        est = med[key]
        cells = [layer, f">{-est:.0f}" if est < 0 else f"{est:.0f}"]
        for n in names:
            if n not in med:  # a sitting without this tuner
                cells.append("")
                continue
            m = med[n]
            mark = ">=" if est < 0 else ""
            mark = "<=" if m > trials else mark
            r = abs(est) / m
            cells.append(f"{mark}{r:.2f}x" if not (est < 0 and m > trials) else "n/a")
            if not (est < 0 and m > trials):
                ratios[n].append(r)
        out.append("| " + " | ".join(cells) + " |")
    geo = ["geomean", ""] + [f"{geometric_mean(v):.2f}x" if v else "-" for v in ratios.values()]
    out.append("| " + " | ".join(geo) + " |")
    return out


def summary_table(rows: dict, tuner_names, trials: int, sizes: dict | None = None) -> str:
    """Per layer: the space's size, random's median trials to 95% (exact where the space is
    fully measured) and each tuner's, with random / tuner; the last line is the geometric mean
    of the ratios. A median that missed counts as ``trials + 1``: the ratio is then a bound
    (``>=`` when random missed, ``<=`` when the tuner did) and enters the mean as that bound."""
    names = [n for n in tuner_names if n != "random"]
    head = "| layer | points | random | " + " | ".join(f"{n} | random/{n}" for n in names) + " |"
    out = [head, "|" + "---|" * (3 + 2 * len(names))]
    ratios = {n: [] for n in names}
    for layer, med in rows.items():
        exact = "random (exact)" in med
        base = med.get("random (exact)", med.get("random"))
        size = f"{sizes[layer]:,}" if sizes else "?"
        shown = f">{trials}" if base > trials and not exact else f"{base:g}"
        cells = [layer, size, f"{shown}{' (exact)' if exact else ''}"]
        for n in names:
            if n not in med:  # a sitting without this tuner
                cells += ["", ""]
                continue
            m, r = med[n], sitting_ratio(med, n, trials)
            if r is None:  # both missed: no ratio
                cells += [f">{trials}", "n/a"]
                continue
            mark = ">=" if (base > trials and not exact) else ""
            mark = "<=" if m > trials else mark
            cells += [f">{trials}" if m > trials else f"{m:g}", f"{mark}{r:.2f}x"]
            ratios[n].append(r)
        out.append("| " + " | ".join(cells) + " |")
    geo = ["geomean", "", ""]
    for n in names:
        geo += ["", f"{geometric_mean(ratios[n]):.2f}x" if ratios[n] else "-"]
    out.append("| " + " | ".join(geo) + " |")
    for key, what in (
        ("random (sampled)", "its pooled samples"),
        ("random (valid)", "its pooled samples that lowered (random search over valid points)"),
    ):
        out += _estimate_table(rows, names, trials, key, what)
    # the AutoTVM paper's view: how good the best config is after the same number of trials
    checks = [c for c in (16, 32, 64) if c <= trials]
    every = list(tuner_names)
    curved = {layer: med for layer, med in rows.items() if med["at"]}  # transcribed: none
    if not curved:
        return "\n".join(out)
    out += ["", "best-so-far cost / optimum (mean over seeds) at " + ", ".join(map(str, checks))]
    out += ["| layer | " + " | ".join(every) + " |", "|" + "---|" * (1 + len(every))]
    for layer, med in curved.items():
        cells = [
            " / ".join(f"{med['at'][n][c]:.2f}" for c in checks) if n in med["at"] else "-"
            for n in every
        ]
        out.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def sitting_ratio(row: dict, name: str, trials: int) -> float | None:
    """Random search's median trials to 95% over ``name``'s in one sitting's ``row`` (exact
    where the space was fully measured; a median that missed counts as ``trials + 1``, so the
    ratio is then a bound), or None where both missed or ``name`` did not run."""
    exact = "random (exact)" in row
    base = row.get("random (exact)", row.get("random"))
    if name not in row or base is None or (row[name] > trials and base > trials and not exact):
        return None
    return base / row[name]


SUMMARY_VERSION = (
    1  # of a sitting's JSON summary (``--summary`` writes, ``--from-summaries`` reads)
)
# random search's median trials to 95% estimated from its own samples: the summary's name of
# each estimate -> its key in a row of ``compare`` (``_sampled_random_trials``)
RANDOM_ESTIMATES = {"uniform": "random (sampled)", "valid": "random (valid)"}


def sitting_summary(label: str, task, row: dict, trials: int, batch: int, seeds: int) -> dict:
    """One layer's runs (``compare``'s ``row``) as the JSON ``--summary`` keeps: each tuner's
    median trials to 95% (``trials + 1``: the median run missed) and every run's (null: it
    missed), random search's estimates from its samples (negative: a bound), the best-so-far
    over the best at the checked trials (mean over seeds), random / tuner at random's final
    level. ``--from-summaries`` reads it back as the row (:func:`row_of`)."""
    names = list(row["hits"])
    level = row.get("at random's level", {})
    medians = {n: row[n] for n in names}
    if "random (exact)" in row:
        medians["random (exact)"] = row["random (exact)"]
    return {
        "v": SUMMARY_VERSION,
        "layer": label,
        "task": task.key,
        "points": len(task.space),
        "trials": trials,
        "batch": batch,
        "seeds": seeds,
        "best": row["best"],
        "unit": task.cost_unit,
        "medians": medians,
        "hits": row["hits"],
        "random_estimates": {k: row[key] for k, key in RANDOM_ESTIMATES.items() if key in row},
        "at": {n: {str(c): v for c, v in row["at"][n].items()} for n in names},
        "equal": {n: level["random"] / level[n] for n in names if n != "random" and n in level},
        "source": "measured",
    }


def row_of(summary: dict) -> dict:
    """The row of :func:`summary_table` a sitting's summary holds (a transcribed one may lack
    the per-run trials and the best-so-far)."""
    row = dict(summary["medians"])
    estimates = summary.get("random_estimates", {})
    row.update({RANDOM_ESTIMATES[k]: v for k, v in estimates.items()})
    row["at"] = {n: {int(c): v for c, v in at.items()} for n, at in summary.get("at", {}).items()}
    row["equal"] = dict(summary.get("equal", {}))
    return row


def load_summaries(paths: list[str]) -> list[dict]:
    """The sittings' summaries in ``paths`` (each file one summary or a list of them)."""
    out = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"--from-summaries: {path}: {e}") from None
        for s in data if isinstance(data, list) else [data]:
            if not isinstance(s, dict) or s.get("v") != SUMMARY_VERSION:
                raise SystemExit(
                    f"--from-summaries: {path}: not a summary of this benchmark (version"
                    f" {SUMMARY_VERSION}, as --summary writes them)"
                )
            out.append(s)
    return out


def summarize_sittings(paths: list[str], plot: str | None = None) -> str:
    """:func:`summary_table` of the sittings summed up in ``paths`` (layers in order, C2 before
    C10; a layer's sittings in the order given, numbered where it has several), then, per
    tuner, **the rule**: each layer's random / tuner the geometric mean of its sittings' ratios
    (a bound counts as its value; a sitting where both missed has none), the figure the
    geometric mean of the layers'; the same at random's final level. With ``plot``, a PNG of
    each sitting's median trials to 95% (``tuner.plot.plot_trials_to_target``)."""
    sittings = load_summaries(paths)
    if not sittings:
        raise SystemExit("--from-summaries: no sittings")
    trials = {s["trials"] for s in sittings}
    if len(trials) != 1:
        raise SystemExit(f"--from-summaries: the runs have different trial counts {sorted(trials)}")
    trials_n = trials.pop()
    by_layer: dict[str, list[dict]] = {}
    for s in sittings:
        by_layer.setdefault(s["layer"], []).append(row_of(s) | {"points": s["points"]})
    layers = sorted(by_layer, key=lambda s: (len(s), s))
    rows, sizes = {}, {}
    for layer in layers:
        for k, row in enumerate(by_layer[layer], 1):
            label = layer if len(by_layer[layer]) == 1 else f"{layer} #{k}"
            rows[label], sizes[label] = row, row["points"]
    tuners = {n for s in sittings for n in s["medians"] if not n.startswith("random")}
    names = ["random", *sorted(tuners)]
    out = [summary_table(rows, names, trials_n, sizes), ""]
    if len(rows) > len(layers):
        out.append("(the table's geomeans are over sittings; the rule's below, over layers)")
    for n in names[1:]:
        ratios = {
            layer: [r for row in by_layer[layer] if (r := sitting_ratio(row, n, trials_n))]
            for layer in layers
        }
        out.append(_rule_line(f"random / {n} median trials to 95%", ratios))
        equal = {
            layer: [r["equal"][n] for r in by_layer[layer] if n in r["equal"]] for layer in layers
        }
        out.append(_rule_line(f"at random's final level, random / {n}", equal))
    if plot:
        from pyvta.tuner.plot import plot_trials_to_target

        medians = {label: {n: r[n] for n in names if n in r} for label, r in rows.items()}
        sampled = {
            label: r["random (sampled)"] for label, r in rows.items() if "random (sampled)" in r
        }
        title = f"trials to 95% of the best, median of each sitting's runs ({len(rows)} sittings)"
        out.append(f"plot: {plot_trials_to_target(medians, trials_n, plot, title, sampled)}")
    return "\n".join(out)


def _rule_line(what: str, ratios: dict[str, list[float]]) -> str:
    """``what`` by the rule: per layer the geometric mean of its sittings' ratios (each shown
    where it has several), and their geometric mean over the layers that have one."""
    per_layer = {layer: geometric_mean(rs) for layer, rs in ratios.items() if rs}
    if not per_layer:
        return f"{what}: no layer has a ratio"
    cells = []
    for layer, g in per_layer.items():
        each = ", ".join(f"{r:.2f}x" for r in ratios[layer])
        cells.append(f"{layer} {g:.2f}x" + (f" ({each})" if len(ratios[layer]) > 1 else ""))
    missing = [layer for layer, rs in ratios.items() if not rs]
    left = f"; none for {', '.join(missing)}" if missing else ""
    return (
        f"{what}, each layer's sittings by their geometric mean: {'; '.join(cells)}{left};"
        f" geomean over {len(per_layer)} layers {geometric_mean(per_layer.values()):.2f}x"
    )
