"""``pyvta tune MODEL.onnx``: a network's layers tuned (``tune_network_command``) — its
accelerator layers (``tuner.network``) or its CPU conv layers (``tuner.cpu_network``), for a
number of trials or under one time budget (``--budget``, ``tuner.budget``), a CPU log's top
schedules re-ranked in the running network (``--in-network K``, ``tuner.in_network``). The
arguments are ``tuner.cli_support``'s (``add_tune_arguments``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyvta.tuner.cli_support import measurer_for, print_summary


def _tune_cpu_network(args: argparse.Namespace) -> int:
    from pyvta.tuner.cpu_measure import cpu_target_info
    from pyvta.tuner.cpu_network import cpu_network_layers, tune_cpu_network

    layers = cpu_network_layers(args.workload)
    if not layers:
        print(f"error: {args.workload} has no CPU conv layers to tune", file=sys.stderr)
        return 1
    print(
        f"tuning {len(layers)} distinct CPU conv layers on {cpu_target_info()}:"
        f" {args.trials} trials per layer on average, spread by each layer's default time"
    )
    final = 4 if args.final_check is None else args.final_check
    results = tune_cpu_network(
        layers, args.trials, log=args.log, tuner=args.tuner, seed=args.seed,
        resume=args.resume, progress=not args.no_progress, final_check=final,
        batch_size=min(args.batch, 16),
    )  # fmt: skip
    print(f"{'task':72s} {'n':>2s} {'default ms':>10s} {'tuned ms':>9s}")
    for layer, task, default_s, best_s in results:
        print(f"{task.key:72s} {layer.count:2d} {default_s * 1e3:10.3f} {best_s * 1e3:9.3f}")
    if args.log:
        print(
            f"log: {args.log} (apply with: pyvta compile {args.workload} --target cpu"
            f" --tuning-log {args.log} -o MODEL.npz)"
        )
    return 0


def tune_network_command(args: argparse.Namespace, spec) -> int:
    """A network's accelerator layers (an accelerator target) or its CPU conv layers (a target
    whose compile applies a tuning log of conv schedules: ``cpu``)."""
    from pyvta.tuner.network import layer_name, network_layers

    if not Path(args.workload).exists():
        print(f"error: no model file {args.workload}", file=sys.stderr)
        return 2
    if not spec.accelerator:
        if "tuning_log" not in spec.compile_options:
            print(
                f"error: a network is tuned for --target vta or cpu, not {spec.name}",
                file=sys.stderr,
            )
            return 2
        if args.in_network < 0 or (args.in_network and not args.log):
            print("error: --in-network K needs K >= 0 and --log", file=sys.stderr)
            return 2
        if args.sweep < 0 or args.passes < 1:
            print(
                f"error: --sweep N needs N >= 0 and --passes P needs P >= 1; got --sweep"
                f" {args.sweep} --passes {args.passes}",
                file=sys.stderr,
            )
            return 2
        if (args.sweep or args.passes > 1) and not args.in_network:
            print("error: --sweep and --passes refine --in-network K: give it", file=sys.stderr)
            return 2
        if getattr(args, "budget", None) is not None:
            from pyvta.tuner.cpu_network import (
                cpu_budget_tasks,
                cpu_network_layers,
                network_measurer,
            )

            cpu_layers = cpu_network_layers(args.workload)
            code = _tune_network_budget(
                args, cpu_budget_tasks(cpu_layers), lambda: network_measurer(cpu_layers)
            )
        elif args.trials > 0:
            code = _tune_cpu_network(args)
        else:  # --trials 0 --in-network K (tune_command checked): the log's bests re-ranked
            code = 0
        if code == 0 and args.in_network:
            code = _rerank_in_network(args)
        elif code == 0 and args.log:
            print(
                "note: per-layer bests measured alone can run slower inside the network (0.89-0.91x"
                " the untuned schedules in ResNet-18, on the CPU that measured them): re-rank them"
                " there with --in-network 3 (writes LOG.network.json, which --tuning-log applies)"
            )
        return code
    layers = network_layers(args.workload)
    if not layers:
        print(f"error: {args.workload} has no accelerator layers to tune", file=sys.stderr)
        return 1
    if getattr(args, "budget", None) is not None:
        from pyvta.tuner.network import budget_tasks

        return _tune_network_budget(args, budget_tasks(layers, args.first))
    launches = sum(layer.count for layer in layers)
    print(
        f"tuning {len(layers)} distinct accelerator layers ({launches} launches per inference),"
        f" {args.trials} trials each, {args.tuner}, seed {args.seed}"
    )
    for layer in layers:
        print(f"  {layer_name(layer)} x{layer.count}")
    try:
        measurer = measurer_for(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        summary = _run_network(args, layers, measurer)
        print_summary(measurer)
    finally:
        if measurer is not None:
            measurer.close()
    print(summary.table())
    if args.log:
        print(f"log: {args.log} (apply with: pyvta run {args.workload} --tuning-log {args.log})")
    if args.plot:
        print(f"tuning curves: {args.plot}")
    return 0


def _flushed(line: str) -> None:
    print(line, flush=True)  # a progress line seen at once, also in a file


def _tune_network_budget(args, tasks, default_measurer=None) -> int:
    """``--budget``: the network's tasks (``tuner.budget.BudgetTask``: a VTA network's layers,
    a CPU network's layers' templates) under one time budget (``tuner.budget``), measured by
    ``--device``'s measurer, else ``default_measurer()`` (None: the first task's target's)."""
    from pyvta.tuner.budget import plot_path, tune_with_budget
    from pyvta.tuner.plot import plot_latency
    from pyvta.tuner.tune import default_measurer as target_measurer

    if not tasks:
        print(f"error: {args.workload} has no layers to tune", file=sys.stderr)
        return 1
    unit = tasks[0].task.cost_unit
    slice_trials = min(args.batch, 16)
    what = len({t.group or t.name for t in tasks})
    print(
        f"tuning {what} distinct layers ({len(tasks)} tasks) for {args.budget_s:.0f} s in all,"
        f" {slice_trials} trials per slice, {args.tuner}, seed {args.seed}"
    )
    try:
        measurer = measurer_for(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if measurer is None:
        measurer = default_measurer() if default_measurer else target_measurer(tasks[0].task)
    try:
        run = tune_with_budget(
            tasks, args.budget_s, measurer, log=args.log, tuner=args.tuner, seed=args.seed,
            slice_trials=slice_trials, progress=None if args.no_progress else _flushed,
            unit=unit,
        )  # fmt: skip
        print_summary(measurer)
    finally:
        measurer.close()
    curve = run.latency_curve()
    scale, shown = (1e3, "ms") if unit == "s" else (1e-6, "M cycles")
    print(f"{'layer':60s} {'n':>2s} {'best ' + shown:>12s} {'trials':>6s}")
    for t, trials in zip(run.tasks, run.trials, strict=True):
        best = min((c for _, c in trials), default=float("inf"))
        print(f"{t.name[:60]:60s} {t.weight:2g} {best * scale:12.4f} {len(trials):6d}")
    _, n_est = run.baseline()
    est = (
        f" ({n_est} layers' untuned cost estimated: not measured, or only the nearest point of its space)"
        if n_est
        else ""
    )
    first = "-" if run.first_pass_s is None else f"{run.first_pass_s:.0f} s"
    if curve:
        print(
            f"one inference: {curve[0][1] * scale:.4f} {shown} untuned{est} ->"
            f" {curve[-1][1] * scale:.4f} {shown} ({curve[0][1] / curve[-1][1]:.3f}x);"
            f" every default measured at {first};"
            f" {run.spent_s:.0f} s of {args.budget_s:.0f} s spent, {run.n_measured} measured now,"
            f" {run.n_resumed} resumed, {run.n_cut} cut at the budget"
        )
    plot = args.plot or (str(plot_path(args.log)) if args.log else None)
    if plot:
        plot_latency(
            run, plot, unit=unit, title=f"{Path(args.workload).name}: budget {args.budget}"
        )
        print(f"latency over time: {plot}")
    if args.log:
        cpu = " --target cpu" if unit == "s" else ""
        print(
            f"log: {args.log} (apply with: pyvta run {args.workload}{cpu} --tuning-log {args.log})"
        )
    return 0


def _rerank_in_network(args) -> int:
    """``--in-network K``: the log's top-K schedules per conv layer re-ranked in the network;
    with ``--sweep N`` also N one-knob moves per layer from its current choice, ``--passes P``
    times, each pass from the last one's choices, the first from those already beside the log
    for this kind of host (each pass writes them: a stopped run goes on from the last)."""
    import time

    from pyvta.tuner.in_network import (
        descend_in_network,
        descent_path,
        in_network_choices,
        in_network_path,
    )
    from pyvta.tuner.plot import plot_descent

    start = in_network_choices(args.log) if args.sweep else None
    progress = None if args.no_progress else _flushed
    t0 = time.perf_counter()
    passes = descend_in_network(
        args.workload, args.log, args.passes, args.sweep, start, top_k=args.in_network,
        progress=progress,
    )  # fmt: skip
    done = []
    for n, rr in enumerate(passes, 1):
        done.append(rr)
        if args.sweep:
            print(
                f"in-network pass {n} of {args.passes} ({time.perf_counter() - t0:.0f} s in all):"
                f" the top {args.in_network} logged and {args.sweep} one-knob moves per layer"
            )
        print(rr.summary())
        print(rr.confirmed())
        if args.sweep:  # each pass drawn as it ends
            plot_descent(done, descent_path(args.log), f"{Path(args.workload).name}: {n} passes")
    print(f"in-network choices: {in_network_path(args.log)}")
    if args.sweep:
        print(f"the passes' confirmations: {descent_path(args.log)}")
    return 0


def _run_network(args, layers, measurer):
    from pyvta.tuner.network import tune_network

    return tune_network(
        layers,
        args.trials,
        log=args.log,
        tuner=args.tuner,
        seed=args.seed,
        resume=args.resume,
        batch_size=args.batch,
        progress=not args.no_progress,
        plot=args.plot,
        first=args.first,
        measurer=measurer,
    )
