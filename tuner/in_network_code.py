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
    from pyvta.compiler.targets.cpu.kernels import node_module
    from pyvta.runtime.cpu_kernels import kernel_shapes

    keys = conv_keys(graph)
    irs: dict[str, set] = {}
    for n in graph.nodes:
        if keys.get(n.name) in only:
            shapes, images = kernel_shapes(graph, n)
            code = node_module(n, shapes, threads, None, images).llvm_ir
            irs.setdefault(keys[n.name], set()).add(code)
    out = {}
    for key, texts in irs.items():
        h = hashlib.sha256(llvm_version().encode())
        for text in sorted(texts):
            h.update(b"\0" + text.encode())
        out[key] = h.hexdigest()[:16]
    return out


def changed_code(model, chosen: dict, threads: int) -> dict[str, dict]:
    """``{workload key: {"chosen": digest, "untuned": digest}}`` (:func:`code_digests`) of the
    conv layers of ``model`` (an ONNX path) whose schedule in ``chosen`` ({workload key:
    schedule}) is not the untuned one: their code in the network planned with ``chosen``, and
    in the untuned network, built for ``threads`` threads (whole networks planned, as they
    run)."""
    untuned = plan_network(model, {})
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


def _distinct_code(model, cands: dict, threads: int, progress) -> dict:
    """Each layer's candidates (``{workload key: [Candidate]}``) less those whose code
    (:func:`code_digests`) is an earlier one's: a schedule written otherwise but compiled to
    the same kernels (a tile of the whole output block given as 0 or as its width) is not a
    rival of itself. ResNet-18 224, Zen 1: the one layer the re-ranking kept ran the untuned
    schedule's code, so the network "tuned" 1.02x was the default network timed twice."""
    first: dict[str, dict] = {key: {} for key in cands}  # key -> {digest: first index}
    for v in range(max(map(len, cands.values()), default=0)):
        pick = {key: c[v].schedule for key, c in cands.items() if v < len(c)}
        code = code_digests(plan_network(model, pick), threads, set(pick))
        for key, digest in code.items():
            first[key].setdefault(digest, v)
    out = {key: [c[i] for i in sorted(first[key].values())] for key, c in cands.items()}
    dropped = sum(map(len, cands.values())) - sum(map(len, out.values()))
    if dropped and progress:
        progress(f"{dropped} candidates dropped: the same code as an earlier one of their layer")
    return out
