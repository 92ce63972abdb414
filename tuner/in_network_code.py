"""The code a network's conv layers run (``tuner.in_network``'s re-ranking and its choices):
the network planned with given schedules, and digests of its layers' compiled kernels, so that
choices name the code they were timed on and candidates of the same code are one."""

from __future__ import annotations

from dataclasses import replace


def plan_network(model, schedules: dict):
    """The layout plan of ``model`` (an ONNX path) for ``"cpu"`` with ``schedules``, no
    kernels built."""
    from pyvta.compiler.graph.onnx_import import import_onnx
    from pyvta.compiler.graph.pipeline import options_for, run_pipeline

    options = replace(options_for("cpu", cpu_schedules=schedules), cpu_build=False)
    return run_pipeline(import_onnx(str(model)), options)


def code_digests(graph, threads: int, only) -> dict[str, str]:
    """``{workload key: digest}`` of the code of each conv layer of ``only`` (workload keys) in
    a planned network (:func:`plan_network`) built for ``threads`` threads: the optimised LLVM IR of
    its kernels (every node of the workload) and LLVM's version. A change to the compiler that
    changes no layer's code changes no digest."""
    import hashlib

    from pyvta.compiler.backend.llvm.cache import llvm_version
    from pyvta.compiler.targets.cpu.builds import build_all
    from pyvta.compiler.targets.cpu.kernels import graph_spec

    keys = conv_keys(graph)
    nodes = [n for n in graph.nodes if keys.get(n.name) in only]
    specs = [graph_spec(graph, n, threads) for n in nodes]
    irs: dict[str, set] = {}
    for n, module in zip(nodes, build_all(specs), strict=True):  # missing ones on every core
        irs.setdefault(keys[n.name], set()).add(module.llvm_ir)
    out = {}
    for key, texts in irs.items():
        h = hashlib.sha256(llvm_version().encode())
        for text in sorted(texts):
            h.update(b"\0" + text.encode())
        out[key] = h.hexdigest()[:16]
    return out


def changed_code(model, chosen: dict, threads: int, untuned=None) -> dict[str, dict]:
    """``{workload key: {"chosen": digest, "untuned": digest}}`` (:func:`code_digests`) of the
    conv layers of ``model`` (an ONNX path) whose schedule in ``chosen`` ({workload key:
    schedule}) is not the untuned one: their code in the network planned with ``chosen``, and
    in the untuned network, built for ``threads`` threads (whole networks planned, as they
    run; ``untuned``: the untuned network's plan, if the caller has it)."""
    untuned = plan_network(model, {}) if untuned is None else untuned
    keys = conv_keys(untuned)
    default = {keys[n.name]: n.attrs["schedule"] for n in untuned.nodes if n.name in keys}
    changed = {k for k, s in chosen.items() if k in default and s != default[k]}
    if not changed:
        return {}
    mine = code_digests(plan_network(model, chosen), threads, changed)
    theirs = code_digests(untuned, threads, changed)
    return {k: {"chosen": mine[k], "untuned": theirs[k]} for k in sorted(changed)}


def conv_keys(graph) -> dict[str, str]:
    """node name -> workload key of each ``cpu_conv2d`` node."""
    from pyvta.compiler.targets.cpu.kernels import node_workload

    return {
        n.name: node_workload(n, graph.values[n.inputs[0]].shape).key
        for n in graph.nodes
        if n.op == "cpu_conv2d"
    }


def _distinct_code(model, cands: dict, threads: int, progress, more=None, want: int = 0) -> dict:
    """Each layer's candidates (``{workload key: [Candidate]}``) less those whose code
    (:func:`code_digests`) is an earlier one's: a schedule written otherwise but compiled to
    the same kernels (a tile of the whole output block given as 0 or as its width) is not a
    rival of itself. ResNet-18 224, Zen 1: the one layer the re-ranking kept ran the untuned
    schedule's code, so the network "tuned" 1.02x was the default network timed twice.

    Then, from ``more`` (``{workload key: [Candidate]}``, in order), up to ``want`` per layer
    of code new to it: one whose code is an earlier one's gives its place to the next (on a
    Zen 5, a 1x1 layer's first one-knob move compiled to its default's code, so ``sweep=1``
    gave it no rival)."""
    seen: dict[str, set] = {key: set() for key in cands}
    out: dict[str, list] = {key: [] for key in cands}

    def admit(batch: dict) -> None:  # each kept if its code is new to its layer
        for v in range(max(map(len, batch.values()), default=0)):
            pick = {key: c[v] for key, c in batch.items() if v < len(c)}
            plan = plan_network(model, {key: c.schedule for key, c in pick.items()})
            for key, digest in code_digests(plan, threads, set(pick)).items():
                if digest not in seen[key]:
                    seen[key].add(digest)
                    out[key].append(pick[key])

    admit(cands)
    offered = sum(map(len, cands.values()))
    first_more = {key: len(c) for key, c in out.items()}
    pool = {key: list(c) for key, c in (more or {}).items()}
    while True:
        batch = {
            key: rest[: want - (len(out[key]) - first_more[key])] for key, rest in pool.items()
        }
        batch = {key: b for key, b in batch.items() if b}
        if not batch:
            break
        for key, b in batch.items():
            del pool[key][: len(b)]
            offered += len(b)
        admit(batch)
    dropped = offered - sum(map(len, out.values()))
    if dropped and progress:
        progress(f"{dropped} candidates dropped: the same code as an earlier one of their layer")
    return out
