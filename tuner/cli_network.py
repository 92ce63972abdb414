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
        if args.sweep < 0 or (args.passes is not None and args.passes < 1):
            print(
                f"error: --sweep N needs N >= 0 and --passes P needs P >= 1; got --sweep"
                f" {args.sweep} --passes {args.passes}",
                file=sys.stderr,
            )
            return 2
        if (args.sweep or args.passes is not None) and not args.in_network:
            print("error: --sweep and --passes refine --in-network K: give it", file=sys.stderr)
            return 2
        left_s = None  # with --budget: the seconds left to the re-rankings in the network
        if getattr(args, "budget", None) is not None:
            from pyvta.tuner.budget import IN_NETWORK_SHARE
            from pyvta.tuner.cpu_network import (
                cpu_budget_tasks,
                cpu_network_layers,
                network_measurer,
            )

            cpu_layers = cpu_network_layers(args.workload)
            share = 1.0 - IN_NETWORK_SHARE if args.in_network else 1.0
            code, run = _tune_network_budget(
                args, cpu_budget_tasks(cpu_layers), lambda: network_measurer(cpu_layers),
                budget_s=share * args.budget_s, plot=not args.in_network,
            )  # fmt: skip
            left_s = None if run is None else args.budget_s - run.spent_s
        elif args.trials > 0:
            code = _tune_cpu_network(args)
        else:  # --trials 0 --in-network K (tune_command checked): the log's bests re-ranked
            code = 0
        if code == 0 and args.in_network:
            code, ranked_s = _rerank_in_network(args, left_s)
            if left_s is not None:  # the budget's plot with the passes' time in it
                if ranked_s:
                    run.in_network_s.append((run.spent_s, run.spent_s + ranked_s))
                    run.spent_s += ranked_s
                run.budget_total_s = args.budget_s
                _plot_budget(args, run)
        elif code == 0 and args.log:
            print(
                "note: per-layer bests measured alone can run slower inside the network (0.89-0.91x"
                " the untuned schedules in ResNet-18, on the CPU that measured them): re-rank them"
                " there with --in-network 3 (writes LOG.network.json, which --tuning-log applies)"
            )
        return code
    if args.in_network or args.sweep or args.passes is not None:
        print(
            "error: --in-network, --sweep and --passes re-rank a CPU network's schedules in the"
            f" running network: --target cpu only, not {spec.name}",
            file=sys.stderr,
        )
        return 2
    layers = network_layers(args.workload)
    if not layers:
        print(f"error: {args.workload} has no accelerator layers to tune", file=sys.stderr)
        return 1
    if getattr(args, "budget", None) is not None:
        from pyvta.tuner.network import budget_tasks

        return _tune_network_budget(args, budget_tasks(layers, args.first))[0]
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


def _tune_network_budget(args, tasks, default_measurer=None, budget_s=None, plot=True):
    """``--budget``: the network's tasks (``tuner.budget.BudgetTask``: a VTA network's layers,
    a CPU network's layers' templates) under one time budget (``tuner.budget``; ``budget_s``
    of it, else all), measured by ``--device``'s measurer, else ``default_measurer()`` (None:
    the first task's target's); the latency over time drawn unless not ``plot``. Returns the
    exit code and the run (None where it failed)."""
    from pyvta.tuner.budget import tune_with_budget
    from pyvta.tuner.tune import default_measurer as target_measurer

    if not tasks:
        print(f"error: {args.workload} has no layers to tune", file=sys.stderr)
        return 1, None
    budget_s = args.budget_s if budget_s is None else budget_s
    unit = tasks[0].task.cost_unit
    slice_trials = min(args.batch, 16)
    what = len({t.group or t.name for t in tasks})
    rest = (
        f" of the {args.budget_s:.0f} s budget (the rest: the re-rankings in the network)"
        if budget_s < args.budget_s
        else " in all"
    )
    print(
        f"tuning {what} distinct layers ({len(tasks)} tasks) for {budget_s:.0f} s{rest},"
        f" {slice_trials} trials per slice, {args.tuner}, seed {args.seed}"
    )
    try:
        measurer = measurer_for(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2, None
    if measurer is None:
        measurer = default_measurer() if default_measurer else target_measurer(tasks[0].task)
    try:
        run = tune_with_budget(
            tasks, budget_s, measurer, log=args.log, tuner=args.tuner, seed=args.seed,
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
            f" {run.spent_s:.0f} s of {budget_s:.0f} s spent, {run.n_measured} measured now,"
            f" {run.n_resumed} resumed, {run.n_cut} cut at the budget"
        )
    if plot:
        _plot_budget(args, run)
    if args.log:
        cpu = " --target cpu" if unit == "s" else ""
        print(
            f"log: {args.log} (apply with: pyvta run {args.workload}{cpu} --tuning-log {args.log})"
        )
    return 0, run


def _plot_budget(args, run) -> None:
    """The budgeted ``run``'s latency over time to ``--plot``, else beside ``--log``."""
    from pyvta.tuner.budget import plot_path
    from pyvta.tuner.plot import plot_latency

    plot = args.plot or (str(plot_path(args.log)) if args.log else None)
    if plot:
        title = f"{Path(args.workload).name}: budget {args.budget}"
        plot_latency(run, plot, unit=run.tasks[0].task.cost_unit, title=title)
        print(f"latency over time: {plot}")


def _rerank_in_network(args, left_s: float | None = None) -> tuple[int, float]:
    """``--in-network K``: the log's top-K schedules per conv layer re-ranked in the network;
    with ``--sweep N`` also N one-knob moves per layer from its current choice, ``--passes P``
    times, each pass from the last one's choices, the first from those already beside the log
    for this kind of host (each pass writes them: a stopped run goes on from the last).

    ``left_s`` (``--budget``): the seconds of the budget left to the passes, whose time is
    counted in the budget's sessions (``tuner.budget.counted_span``). Where this host has
    choices already, a pass starts only while the time left holds one more (as long as the
    last one took, as recorded with the choices); ``--passes`` caps them (without it: a sweep
    runs passes until the budget is spent, a re-ranking alone once). Returns the exit code
    and the seconds the passes took (0 where none started)."""
    import time
    from contextlib import nullcontext

    from pyvta.tuner.budget import counted_span
    from pyvta.tuner.cpu_measure import cpu_measured_on
    from pyvta.tuner.in_network import (
        descend_in_network,
        descent_path,
        in_network_choices,
        in_network_hosts,
        in_network_path,
    )
    from pyvta.tuner.plot import plot_descent

    budgeted = left_s is not None
    passes_max = args.passes or (None if budgeted and args.sweep else 1)
    start = in_network_choices(args.log)
    last_s = in_network_hosts(args.log).get(cpu_measured_on(), {}).get("seconds") or 0.0
    done, of = [], passes_max or "as many as the budget holds"

    def no_room(left: float) -> bool:  # with choices made, no pass started past the budget
        if not (budgeted and (start or done) and (left <= 0 or left < last_s)):
            return False
        print(
            f"in the network: {max(left, 0):.0f} s of the budget left, less than the last pass"
            f" took ({last_s:.0f} s): {f'stopped after {len(done)}' if done else 'none started'};"
            f" the choices in {in_network_path(args.log)} stand"
        )
        return True

    if budgeted and no_room(left_s):
        return 0, 0.0
    if budgeted:
        print(f"in the network: {max(left_s, 0.0):.0f} s of the budget left")
    t0 = time.perf_counter()
    with counted_span(args.log) if budgeted else nullcontext(lambda: None) as mark:

        def progress(line: str) -> None:  # the budget's span written as the pass goes
            mark()
            if not args.no_progress:
                _flushed(line)

        passes = descend_in_network(
            args.workload, args.log, passes_max, args.sweep, start if args.sweep else None,
            top_k=args.in_network, progress=progress,
        )  # fmt: skip
        while passes_max is None or len(done) < passes_max:
            if budgeted and no_room(left_s - (time.perf_counter() - t0)):
                break
            t_pass = time.perf_counter()
            rr = next(passes)
            mark()
            done.append(rr)
            n = len(done)
            if args.sweep:
                print(
                    f"in-network pass {n} of {of} ({time.perf_counter() - t0:.0f} s in all):"
                    f" the top {args.in_network} logged and {args.sweep} one-knob moves per layer"
                )
            print(rr.summary())
            print(rr.confirmed())
            if args.sweep:  # each pass drawn as it ends
                plot_descent(
                    done, descent_path(args.log), f"{Path(args.workload).name}: {n} passes"
                )
            # the room the next pass needs: all this one cost the budget, its drawing included
            last_s = max(rr.seconds or 0.0, time.perf_counter() - t_pass)
    if done:
        print(_kept_line(done[-1], len(done)))
    print(f"in-network choices: {in_network_path(args.log)}")
    if args.sweep:
        print(f"the passes' confirmations: {descent_path(args.log)}")
    spent = time.perf_counter() - t0
    if budgeted and not args.sweep and left_s - spent > 0:
        print(
            f"in the network: {left_s - spent:.0f} s of the budget unused (a re-ranking without"
            " --sweep runs once; --sweep N spends the rest on passes)"
        )
    return 0, spent


def _kept_line(rr, n: int) -> str:
    """One line on what the last pass (``rr``, the ``n``-th) kept and how fast it ran."""
    if not rr.confirmations:
        return f"kept after pass {n}: each layer's fastest in the ranking (no confirmation)"
    kept = rr.kept()
    if kept is None:
        return f"kept after pass {n}: every layer's default (no network beat its control)"
    k, win, start = kept
    again = "" if win.control is None else f"; the defaults built again {win.control:.3f}x"
    return (
        f"kept after pass {n}: {len(win.layer_ms)} layers changed, {win.speedup:.3f}x the"
        f" defaults in the network (paired, confirmation {k}{start}{again})"
    )


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
