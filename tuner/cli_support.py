"""Entry points for a ``pyvta tune`` subcommand (wired by ``pyvta/``; nothing here reads
``sys.argv``).

    parser = subparsers.add_parser("tune"); add_tune_arguments(parser)
    ...; return tune_command(args)

Workloads: ``gemm:M,N,K``, ``conv2d:C,H,W,O,K,STRIDE,PAD``, or a ResNet-18 layer ``C1``..``C12``
(batch 1, "same" padding) on the CPU; ``vta:C2``..``vta:C12`` or
``vta:H,W,IC,OC,K,STRIDE,PAD`` for the VTA conv2d template on the simulator's cycle model; or a
network, ``MODEL.onnx`` (or a compiled ``.npz``): every accelerator layer of it, each for
``--trials`` (``tuner.network``), into one log that ``pyvta run --tuning-log`` applies.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from pyvta.compiler.targets.gpu.devices import NAMES as GPU_DEVICES

# ResNet-18 conv2d layers (H=W, IC, OC, K, stride) from the AutoTVM / TVM papers
RESNET18 = {
    "C1": (224, 3, 64, 7, 2),
    "C2": (56, 64, 64, 3, 1),
    "C3": (56, 64, 64, 1, 1),
    "C4": (56, 64, 128, 3, 2),
    "C5": (56, 64, 128, 1, 2),
    "C6": (28, 128, 128, 3, 1),
    "C7": (28, 128, 256, 3, 2),
    "C8": (28, 128, 256, 1, 2),
    "C9": (14, 256, 256, 3, 1),
    "C10": (14, 256, 512, 3, 2),
    "C11": (14, 256, 512, 1, 2),
    "C12": (7, 512, 512, 3, 1),
}


def layer_names(text: str) -> list[str]:
    """ResNet-18 layer names from a comma list of names and ranges: ``"C2-C12"``, ``"C5,C8"``,
    ``"C1-C6,C10-C12"``; ``ValueError`` naming the layers there are for an unknown one."""
    names = []
    for part in (p.strip().upper() for p in text.split(",")):
        if "-" in part:
            ends = [v.strip().removeprefix("C") for v in part.split("-")]
            if len(ends) != 2 or not all(e.isdigit() for e in ends):
                raise ValueError(f"bad layer range {part!r}: write it as C2-C6")
            names += [f"C{i}" for i in range(int(ends[0]), int(ends[1]) + 1)]
        elif part:
            names.append(part)
    bad = [n for n in names if n not in RESNET18]
    if bad or not names:
        raise ValueError(f"unknown layers {bad or text!r}; ResNet-18 has {', '.join(RESNET18)}")
    return names


def resnet18_nchwc_workload(name: str):
    """ResNet-18 layer ``name`` (``C1``..``C12``) as the CPU network runs it, a
    ``compiler.targets.cpu.kernels.ConvWorkload`` (``tuner.cpu.resnet18_cpu_workloads``: the
    layout plan's channel blocks)."""
    from pyvta.tuner.cpu import resnet18_cpu_workloads

    if name.upper() not in RESNET18:
        raise ValueError(f"unknown layer {name!r}; ResNet-18 has {', '.join(RESNET18)}")
    return resnet18_cpu_workloads()[name.upper()]


def _cpu_operators(backend: str):
    from pyvta.tuner.cpu import conv2d_task, gemm_task

    return gemm_task, conv2d_task


def _gpu_operators(backend: str):
    from pyvta.tuner.cuda import gpu_conv2d_task, gpu_gemm_task

    gemm = functools.partial(gpu_gemm_task, target=backend)
    return gemm, functools.partial(gpu_conv2d_task, target=backend)


OPERATOR_TEMPLATES = {
    "llvm": _cpu_operators,
    "vta-sim": _cpu_operators,  # the accelerator's own are vta:...; its host's are the CPU's
    **{name: _gpu_operators for name in GPU_DEVICES},
}
"""Tuner backend (a ``Target``'s ``tuner_backend``, or the GPU's device) -> (backend) -> its
(gemm_task, conv2d_task) makers."""

OLD_TARGETS: dict[str, tuple[str, str | None]] = {
    "llvm": ("cpu", None),
    **{name: ("gpu", name) for name in GPU_DEVICES},
    "vta-sim": ("vta", None),
}
"""``pyvta tune``'s old ``--target`` spellings -> (target, device) (``vta-sim`` is the cycle
model, what ``--target vta`` measures on without ``--device``)."""


def _nchwc_task(rest: str):
    from pyvta.tuner.cpu import CONV2D_NCHWC, nchwc_task_args

    return CONV2D_NCHWC.task(*nchwc_task_args(resnet18_nchwc_workload(rest)))


def _vta_task(rest: str):
    from pyvta.tuner.vta import vta_conv2d_task

    if rest.upper() in RESNET18:
        hw, ic, oc, k, s = RESNET18[rest.upper()]
        return vta_conv2d_task(hw, hw, ic, oc, k, s, k // 2)
    try:
        return vta_conv2d_task(*[int(v) for v in rest.split(",")])
    except (TypeError, ValueError):
        syntax = PREFIXED_WORKLOADS["vta"][2]
        raise ValueError(f"workload 'vta:{rest}' not understood ({syntax})") from None


PREFIXED_WORKLOADS = {
    "nchwc": ("cpu", _nchwc_task, "nchwc:C1..C12"),
    "vta": ("vta", _vta_task, "vta:C2..C12 | vta:H,W,IC,OC,K,STRIDE,PAD"),
}
"""A workload's ``PREFIX:`` -> (the target it belongs to whatever ``--target``, its task
maker from the rest of the text, its syntax for errors); operators without a prefix are the
tuner backend's (the CPU's by default)."""


def _prefixed(text: str):
    prefix, colon, rest = text.partition(":")
    return (PREFIXED_WORKLOADS.get(prefix), rest) if colon else (None, rest)


def workload_target(text: str) -> str:
    """The target a workload implies when ``--target`` is not given: its prefix's
    (``PREFIXED_WORKLOADS``), the CPU for the operators."""
    family, _ = _prefixed(text)
    return family[0] if family else "cpu"


def parse_workload(text: str, target: str = "llvm"):
    """A ``Task`` from ``gemm:M,N,K``, ``conv2d:C,H,W,O,K,S,P`` or ``C1``..``C12`` for the tuner
    backend ``target`` (``llvm``: the CPU templates; ``cuda`` / ``cuda-emulated``: the GPU
    ones); a ``PREFIXED_WORKLOADS`` one (``vta:...``, ``nchwc:...``) is its own family's
    whatever ``target``."""
    if target not in OPERATOR_TEMPLATES:
        raise ValueError(f"tuner backend {target!r} (allowed: {', '.join(OPERATOR_TEMPLATES)})")
    family, rest = _prefixed(text)
    if family:
        return family[1](rest)
    gemm_task, conv2d_task = OPERATOR_TEMPLATES[target](target)
    if text.upper() in RESNET18:
        hw, ic, oc, k, s = RESNET18[text.upper()]
        return conv2d_task(ic, hw, hw, oc, k, s, k // 2)
    kind, _, rest = text.partition(":")
    try:
        nums = [int(v) for v in rest.split(",")] if rest else []
    except ValueError:
        nums = None
    if kind == "gemm" and nums and len(nums) == 3:
        return gemm_task(*nums)
    if kind == "conv2d" and nums and len(nums) == 7:
        return conv2d_task(*nums)
    prefixed = " | ".join(syntax for _, _, syntax in PREFIXED_WORKLOADS.values())
    raise ValueError(
        f"workload {text!r} not understood (allowed: gemm:M,N,K | conv2d:C,H,W,O,K,STRIDE,PAD"
        f" | {', '.join(RESNET18)} | {prefixed})"
    )


def add_tune_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument(
        "workload",
        help="gemm:M,N,K | conv2d:C,H,W,O,K,STRIDE,PAD | C1..C12 | vta:C2..C12 | MODEL.onnx",
    )
    p.add_argument(
        "--trials",
        type=int,
        default=200,
        help="measurements in all; for a network, per layer (default 200); 0 with"
        " --in-network K: no new ones, the --log's bests re-ranked in the network",
    )
    p.add_argument("--tuner", default="xgb", choices=["xgb", "xgb-reg", "random", "ga"])
    p.add_argument("--batch", type=int, default=64, help="candidates measured per round")
    p.add_argument("--log", default=None, help="JSON-lines tuning log to append to")
    p.add_argument("--resume", action="store_true", help="continue the run recorded in --log")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per candidate")
    p.add_argument("--plot", default=None, help="write the tuning curve to this PNG")
    p.add_argument("--early-stopping", type=int, default=None, dest="early_stopping")
    p.add_argument(
        "--transfer-log",
        default=None,
        dest="transfer_log",
        help="log of other workloads of the same template: train a global model on it",
    )
    p.add_argument(
        "--features",
        default=None,
        choices=["knob", "context", "context+knob", "curve", "curve+knob", "loop", "loop+knob"],
        help="cost-model features of one operator (default: context where the template has"
        " them, as VTA's does, else knob)",
    )
    p.add_argument(
        "--first",
        type=int,
        default=12,
        help="measure the backend's N most promising configs first, where the template has"
        " them (VTA: its best analytic estimates alternated with its largest tiles); 0: the"
        " first batch is the tuner's own (a network still measures each layer's default"
        " first) (default 12)",
    )
    p.add_argument(
        "--final-check",
        type=int,
        default=None,
        dest="final_check",
        help="after the trials, re-measure the N best configs 3 times in turns and keep the"
        " steadiest best (default 8 for wall-clock targets (CPU), 0 for the cycle model)",
    )
    p.add_argument(
        "--device",
        default=None,
        metavar="NAME[,NAME...]",
        help="--target vta: measure each candidate's cycles on this device (a driver.open name:"
        " rtl, sim, tcp://HOST:PORT, ...) instead of the cycle model's estimate; several,"
        " comma-separated: fan the measurements out over them with Dask (pyvta[distributed]);"
        " --target gpu: cuda (default) or cuda-emulated (the GPU kernels emulated on the CPU:"
        " correctness-checked search only, its costs are CPU times)",
    )
    p.add_argument(
        "--target",
        default=None,
        help="cpu | gpu | vta: operators (gemm/conv2d/C1..C12) on the CPU (the default) or a GPU;"
        " vta:... workloads and networks on the accelerator (the default for them), a network's"
        " CPU conv layers with cpu (old spellings: llvm, cuda, cuda-emulated, vta-sim);"
        " arm-a9 | arm-a53: operators cross-compiled for a board's CPU, timed on --device"
        " tcp://BOARD:PORT (pyvta serve --device cpu there)",
    )
    p.add_argument("--devices", default=None, help=argparse.SUPPRESS)  # old: --device A,B
    p.add_argument(
        "--scheduler",
        default=None,
        help="with --device A,B: an existing Dask scheduler whose workers carry the resources"
        " vta-device-0, vta-device-1, ... (one per device, in --device order)",
    )
    p.add_argument(
        "--key-file", dest="key_file", help="tcp:// devices: the key their servers were given"
    )
    p.add_argument(
        "--budget",
        default=None,
        metavar="DURATION",
        help="a network (--target vta or cpu): tune for this much wall time in all (90s, 20m,"
        " 1.5h) instead of --trials per layer, slices of min(--batch, 16) trials to the layer"
        " with the largest expected gain; with --in-network K, a share of it goes to the"
        " re-rankings in the network (tuner.budget.IN_NETWORK_SHARE); with --log, running again continues the run recorded"
        " there (the time spent counts) and the network's latency over time goes to"
        " LOG.latency.png",
    )
    p.add_argument(
        "--in-network",
        dest="in_network",
        type=int,
        default=0,
        metavar="K",
        help="a network on --target cpu, with --log: after tuning, time each conv layer's default"
        " and K best logged schedules inside the running network and keep the fastest there"
        " (LOG.network.json, applied by --tuning-log LOG); 0 (the default): do not",
    )
    p.add_argument(
        "--sweep",
        type=int,
        default=0,
        metavar="N",
        help="with --in-network K: also time per layer N schedules one knob away from its"
        " current choice in the network (the first pass: the choices already in LOG.network.json"
        " for this CPU, else the defaults)",
    )
    p.add_argument(
        "--passes",
        type=int,
        default=None,
        metavar="P",
        help="with --in-network K --sweep N: P re-rankings in the network, each sweeping from the"
        " last one's choices (a coordinate descent; each pass is written to LOG.network.json, so"
        " a run stopped between passes goes on from the last one); default 1, with --budget as"
        " many as the budget's share for them holds",
    )
    p.add_argument("--no-progress", action="store_true", dest="no_progress")
    return p


def device_measurer(name: str, **device_kwargs):
    """A measurer that runs VTA candidates on the device ``name`` (one run worker owns it);
    ``device_kwargs`` go to ``driver.open`` (``key_file=`` for a tcp:// device)."""
    from pyvta.tuner.measure import LocalMeasurer
    from pyvta.tuner.vta import VtaDeviceBackend

    backend = VtaDeviceBackend(name, **device_kwargs)
    return LocalMeasurer(backend, repeats=1, n_run_workers=1, run_timeout_s=600)


def _device_kwargs(args) -> dict:
    return {"key_file": args.key_file} if getattr(args, "key_file", None) else {}


def _old_devices(args) -> None:
    """``--devices A,B`` (the old spelling of ``--device A,B``) moved into ``args.device``; it
    always fanned out with Dask, even over one device (``args.fan_out``)."""
    devices = getattr(args, "devices", None)
    if not devices:
        return
    if args.device:
        raise ValueError("give --device or --devices, not both")
    print(
        f"notice: --devices {devices} is the old spelling of --device {devices} (accepted for"
        " one release)",
        file=sys.stderr,
    )
    args.device, args.devices, args.fan_out = devices, None, True


def measurer_for(args):
    """The measurer ``--device`` asks for (None: the task's default): one device, or several
    (comma-separated, or with ``--scheduler``) fanned out with Dask."""
    _old_devices(args)
    names = [d.strip() for d in (args.device or "").split(",") if d.strip()]
    scheduler = getattr(args, "scheduler", None)
    if scheduler and not names:
        raise ValueError("--scheduler needs --device A,B (the devices its workers measure on)")
    if len(names) > 1 or scheduler or getattr(args, "fan_out", False):
        from pyvta.tuner.distributed import DaskMeasurer

        return DaskMeasurer(names, _device_kwargs(args), scheduler=scheduler)
    if names:
        return device_measurer(names[0], **_device_kwargs(args))
    return None


def resolve_target(args, network: bool):
    """(Target, device) of ``--target``/``--device`` for a workload (``vta:...`` and networks:
    ``vta`` by default, other operators ``cpu``); an old spelling prints a one-line notice."""
    from pyvta.compiler.targets import NETWORK_DEFAULT, resolve

    _old_devices(args)
    implied = NETWORK_DEFAULT if network else workload_target(args.workload)
    spec, device, said = resolve(args.target or implied, None, OLD_TARGETS, default_device=False)
    if said:
        print(f"notice: {said}", file=sys.stderr)
    if args.device is not None and spec.devices and not spec.accelerator:
        device = spec.check_device(args.device)  # the GPU's: cuda or cuda-emulated
        args.device = None
    return spec, device


def _board_target(args, network: bool):
    """The board CPU ``--target`` names (``arm-a9``, ``arm-a53``: ``compiler.backend.llvm.
    target.BOARD_CPUS``), or None; a board's operators are measured on ``--device
    tcp://BOARD`` (``pyvta serve --device cpu`` there)."""
    from pyvta.tuner.cpu_remote import board_cpu_of

    board = board_cpu_of(args.target)
    if board is None:
        return None
    _old_devices(args)
    if network:
        raise ValueError(
            f"--target {args.target}: a board CPU's operators are tuned (gemm:..., conv2d:...,"
            " C1..C12), not yet a network's layers"
        )
    if not args.device:
        raise ValueError(
            f"--target {args.target} measures on the board: give --device tcp://BOARD:PORT"
            " (pyvta serve --device cpu there)"
        )
    return board


def _board_measurer(args, board):
    from pyvta.tuner.cpu_remote import board_measurer

    names = [d.strip() for d in args.device.split(",") if d.strip()]
    scheduler = getattr(args, "scheduler", None)
    return board_measurer(names, board.name, args.repeats, scheduler, **_device_kwargs(args))


def print_summary(measurer) -> None:
    if hasattr(measurer, "summary"):
        print(measurer.summary())


def tune_command(args: argparse.Namespace) -> int:
    """Run ``tune`` for ``args`` (from ``add_tune_arguments``); prints the best config.
    Returns a process exit code."""
    from pyvta.tuner.tune import default_measurer, task_backend, tune

    if args.resume and not args.log:
        print("error: --resume needs --log", file=sys.stderr)
        return 2
    for flag, value in (("--first", args.first), ("--final-check", args.final_check)):
        if value is not None and value < 0:
            print(f"error: {flag} must be >= 0, got {value}", file=sys.stderr)
            return 2
    network = Path(args.workload).suffix in (".onnx", ".npz")
    rerank_only = network and args.trials == 0 and getattr(args, "in_network", 0) > 0
    if rerank_only and not (args.log and Path(args.log).exists()):
        print(
            "error: --trials 0 --in-network K re-ranks the bests of an existing --log; no log"
            f" {args.log}",
            file=sys.stderr,
        )
        return 2
    positive = [("--batch", args.batch), ("--repeats", args.repeats)]
    positive += [("--trials", None if rerank_only else args.trials)]
    positive.append(("--early-stopping", args.early_stopping))
    for flag, value in positive:
        if value is not None and value < 1:
            print(f"error: {flag} must be >= 1, got {value}", file=sys.stderr)
            return 2
    if getattr(args, "transfer_log", None):
        from pyvta.tuner.log import LogError, check_log_to_read

        if not args.tuner.startswith("xgb"):
            raise LogError(
                f"--transfer-log trains the xgb tuners' cost model; --tuner {args.tuner} has none"
                " (drop it, or use --tuner xgb / xgb-reg)"
            )
        if Path(args.workload).suffix in (".onnx", ".npz"):
            raise LogError("--transfer-log applies to one operator's tuning, not a network's")
        check_log_to_read(args.transfer_log, "--transfer-log")
    if getattr(args, "budget", None) is not None:
        from pyvta.tuner.budget import BudgetError, parse_duration

        try:
            args.budget_s = parse_duration(args.budget)
        except BudgetError as e:
            print(f"error: --budget: {e}", file=sys.stderr)
            return 2
        if not network:
            print("error: --budget tunes a network (MODEL.onnx or .npz)", file=sys.stderr)
            return 2
    try:
        board = _board_target(args, network)
        spec, device = (None, None) if board else resolve_target(args, network)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if network:
        from pyvta.tuner.cli_network import tune_network_command

        return tune_network_command(args, spec)
    try:
        if board:  # a board's CPU tunes the CPU target's operators
            from pyvta.compiler.targets import get_target

            cpu_backend = get_target("cpu").tuner_backend
        backend = cpu_backend if board else device or spec.tuner_backend
        if backend is None:
            raise ValueError(f"--target {spec.name} has no operators to tune (cpu, gpu, vta)")
        task = parse_workload(args.workload, backend)
        if board:
            from pyvta.tuner.cpu_remote import board_task

            if task.target != cpu_backend:
                raise ValueError(f"--target {args.target} tunes CPU operators, not {task.name}")
            task = board_task(task, board.name)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"tuning {task.key}: {task.space}  (seed {args.seed})")
    from pyvta.tuner.features import feature_problem
    from pyvta.tuner.tuners import default_features

    features = getattr(args, "features", None) or default_features(task)
    why = feature_problem(task, features)
    if why:
        print(f"error: --features {features}: {why}", file=sys.stderr)
        return 2
    extra = {"features": features} if args.tuner.startswith("xgb") else {}
    if getattr(args, "transfer_log", None) and args.tuner.startswith("xgb"):
        from pyvta.tuner.features import make_featurizer
        from pyvta.tuner.log import tasks_in_log, training_data
        from pyvta.tuner.model import global_model

        same = {task.name: task.template}  # knob/context features: within one template
        data = training_data(args.transfer_log, tasks_in_log(args.transfer_log, same, task))
        if data:
            extra["base"] = global_model(data, featurizer=make_featurizer(features), seed=args.seed)
            n = sum(len(d[1]) for d in data)
            print(f"transfer: global model on {n} records of {len(data)} other workloads")
    initial = task.prior(args.first)
    if initial:
        print(
            f"first: the backend's {len(initial)} most promising configs"
            " (its best analytic estimates and its largest tiles)"
        )
    on_devices = args.device
    if on_devices and not board and not task_backend(task).on_devices:
        print(
            f"error: --device(s) measure VTA workloads; {task.name} runs on the CPU",
            file=sys.stderr,
        )
        return 2
    try:
        m = _board_measurer(args, board) if board else measurer_for(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    m = default_measurer(task) if m is None else m
    if board:
        print(f"measuring on {on_devices}: kernels cross-compiled for {board.cpu} ({board.triple})")
    elif on_devices:
        print(f"measuring on {on_devices} (cycles from the device counters)")
    final_check = args.final_check
    if task_backend(task).timed:
        m.repeats = args.repeats
        final_check = 8 if final_check is None else final_check
    with m:
        res = tune(
            task,
            args.trials,
            m,
            tuner=args.tuner,
            batch_size=args.batch,
            log=args.log,
            resume=args.resume,
            seed=args.seed,
            progress=not args.no_progress,
            plot=args.plot,
            early_stopping=args.early_stopping,
            initial=initial,
            final_check=final_check or 0,
            **extra,
        )
        print_summary(m)
    if res.best_index is None:
        print(f"no valid config in {len(res.history)} trials ({res.n_errors} errors)")
        return 1
    best = (
        f"{res.best_cost * 1e3:.4f} ms" if task.cost_unit == "s" else f"{res.best_cost:.0f} cycles"
    )
    print(
        f"best {best} after {len(res.history)} trials "
        f"({res.n_resumed} resumed, {res.n_errors} errors, {res.wall_s:.1f} s): "
        f"{res.best_config.to_dict()}"
    )
    if res.rechecked:
        print(f"final check: the {len(res.rechecked)} best re-measured 3x, best by median")
    if args.plot:
        print(f"tuning curve: {args.plot}")
    return 0


def main(argv=None) -> int:
    """``python -m tuner.cli_support gemm:512,512,512 --trials 64``."""
    p = add_tune_arguments(argparse.ArgumentParser(prog="tune"))
    return tune_command(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
