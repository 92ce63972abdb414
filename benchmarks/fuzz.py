"""Fuzz campaign: bad input never crashes or hangs, it raises a PyvtaError.

Four campaigns, each case under a wall-clock timeout (SIGALRM):

- ``words``: random 128-bit words through ``isa.decode``;
- ``programs``: random programs (random words, random fields encoded, and valid random programs
  with flipped bits) through ``sim.run``, ``sim.run(check_races=True)`` and ``sim.run_cycles``;
- ``models``: mutated ONNX models (structural edits of the graph proto, flipped or cut bytes)
  through ``import_onnx`` and ``compile_model`` for a random target;
- ``artifacts``: mutated compiled artifacts (``.npz``) through ``CompiledModel.load`` and a run.

Only a PyvtaError is an accepted outcome besides success; anything else is a traceback, and a
case past its timeout is a hang. Prints counts per outcome and the time taken; exits 1 on any
traceback or hang. Not part of the test suite (minutes)::

    nice .venv/bin/python -P benchmarks/fuzz.py                 # 1e5 words, 1e5 programs, ...
    nice .venv/bin/python -P benchmarks/fuzz.py --programs 2000 --models 100 --artifacts 50

The simulator runs with ``SimLimits(max_iters_per_insn=1 << 16)`` so that a random GEMM of 2**40
iterations is a SimLimitError, not a long run (the per-program limit is the simulator's own).
"""

from __future__ import annotations

import argparse
import collections
import io
import resource
import signal
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

from pyvta import sim
from pyvta.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    HwConfig,
    MemInsn,
    MemType,
    decode,
    encode_insns,
)
from pyvta.isa.errors import PyvtaError
from pyvta.sim.random_program import random_program


def fuzzed_targets() -> list[str]:
    """The compile targets whose networks run on this machine without a GPU (found by their
    ``placement``, not by name): what the model and artifact campaigns compile for."""
    from pyvta.compiler.targets import get_target, target_names
    from pyvta.runtime.ir import GPU

    return [n for n in target_names() if get_target(n).placement != GPU]


CFG = HwConfig()
LIMITS = sim.SimLimits(max_iters_per_insn=1 << 16, chunk_iters=1 << 12)
MEMORY_LIMIT_BYTES = 6 << 30  # a mutated shape of 10^12 elements is a MemoryError, not swapping


class Hang(BaseException):
    """Raised by the alarm: a case ran past its timeout."""


def _alarm(signum, frame):
    raise Hang


class Tally:
    """Outcomes of one campaign: ok, clean errors by class, tracebacks and hangs (first few kept)."""

    def __init__(self, name: str):
        self.name = name
        self.n = 0
        self.ok = 0
        self.clean: collections.Counter = collections.Counter()
        self.tracebacks: list[tuple[str, str]] = []
        self.hangs: list[str] = []
        self.wall_s = 0.0
        self.insns = 0  # instruction words in the cases (programs)

    def run(self, what: str, fn, timeout_s: float) -> None:
        self.n += 1
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            fn()
            self.ok += 1
        except PyvtaError as exc:
            self.clean[type(exc).__name__] += 1
        except Hang:
            self.hangs.append(what)
        except Exception:
            self.tracebacks.append((what, traceback.format_exc(limit=-6)))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def summary(self) -> str:
        clean = ", ".join(f"{k} {v}" for k, v in self.clean.most_common())
        words = f" ({self.insns} instruction words)" if self.insns else ""
        return (
            f"{self.name:10s} {self.n:7d} cases{words} in {self.wall_s:7.1f} s:"
            f" {self.ok} ok, {sum(self.clean.values())} PyvtaError ({clean or '-'}),"
            f" {len(self.tracebacks)} tracebacks, {len(self.hangs)} hangs"
        )


# ---- instruction words and programs ----------------------------------------------------------


def _random_word(rng) -> int:
    hi, lo = (int(v) for v in rng.integers(0, 1 << 63, 2, dtype=np.int64))
    word = (hi << 65) ^ (lo << 1) ^ int(rng.integers(0, 2))
    return (word & ~0x7) | int(rng.integers(0, 8))  # every opcode value, valid or not


def _u(rng, bits: int, small: bool) -> int:
    top = min(1 << bits, 24) if small else 1 << bits
    return int(rng.integers(0, top))


def _random_insn(rng):
    """An instruction with random fields (small or full range): encodes, rarely in bounds."""
    small = rng.random() < 0.7
    kind = rng.integers(0, 4)
    flags = {f: bool(rng.integers(0, 2)) for f in ("pop_prev_dep", "pop_next_dep")}
    flags.update({f: bool(rng.integers(0, 2)) for f in ("push_prev_dep", "push_next_dep")})
    if kind == 0:
        store = rng.random() < 0.3
        mt = MemType.OUT if store else rng.choice([m for m in MemType if m is not MemType.OUT])
        return MemInsn(
            is_store=store, memory_type=mt, sram_base=_u(rng, 16, small),
            dram_base=_u(rng, 32, small), y_size=_u(rng, 16, small), x_size=_u(rng, 16, small),
            x_stride=_u(rng, 16, small), y_pad_0=_u(rng, 4, True), y_pad_1=_u(rng, 4, True),
            x_pad_0=_u(rng, 4, True), x_pad_1=_u(rng, 4, True), **flags,
        )  # fmt: skip
    if kind == 3:
        return FinishInsn(**flags)
    bgn = _u(rng, 13, small)
    loop = dict(
        uop_bgn=bgn, uop_end=bgn + _u(rng, 4, True), iter_out=_u(rng, 14, small),
        iter_in=_u(rng, 14, small), dst_factor_out=_u(rng, 11, small),
        dst_factor_in=_u(rng, 11, small), src_factor_out=_u(rng, 11, small),
        src_factor_in=_u(rng, 11, small), reset_reg=bool(rng.integers(0, 2)), **flags,
    )  # fmt: skip
    if kind == 1:
        return GemmInsn(wgt_factor_out=_u(rng, 10, small), wgt_factor_in=_u(rng, 10, small), **loop)
    return AluInsn(
        alu_opcode=AluOp(int(rng.choice([op.value for op in AluOp]))),
        use_imm=bool(rng.integers(0, 2)), imm=int(rng.integers(-32768, 32768)), **loop,
    )  # fmt: skip


def _program_of_words(rng, words: list[int]) -> sim.Program:
    raw = b"".join(w.to_bytes(16, "little") for w in words)
    dram = rng.integers(0, 256, 1 << 14, dtype=np.uint8)
    dram[: len(raw)] = np.frombuffer(raw, np.uint8)
    return sim.Program(dram, 0, len(words))


def random_case_program(rng) -> sim.Program:
    kind = rng.integers(0, 3)
    n = int(rng.integers(1, 10))
    if kind == 0:  # random words, often with a FINISH at the end
        words = [_random_word(rng) for _ in range(n)]
        if rng.random() < 0.5:
            words.append(FinishInsn().encode(CFG))
        return _program_of_words(rng, words)
    if kind == 1:  # random fields, encoded
        insns = [_random_insn(rng) for _ in range(n)] + [FinishInsn()]
        words = [int.from_bytes(encode_insns([i], CFG), "little") for i in insns]
        return _program_of_words(rng, words)
    p = random_program(rng, n_insns=(2, 12), max_iters=256)  # valid, then bits flipped
    dram = p.dram.copy()
    span = p.insn_count * 16 if rng.random() < 0.8 else dram.size - p.insn_addr
    for _ in range(int(rng.integers(1, 5))):
        pos = p.insn_addr + int(rng.integers(0, span))
        dram[pos] ^= np.uint8(1 << int(rng.integers(0, 8)))
    return sim.Program(dram, p.insn_addr, p.insn_count, p.config)


def fuzz_words(rng, n: int) -> Tally:
    t = Tally("words")
    t0 = time.perf_counter()
    for i in range(n):
        word = _random_word(rng)
        t.run(f"word {word:#034x}", lambda w=word, i=i: decode(w, CFG, index=i), 5)
    t.wall_s = time.perf_counter() - t0
    return t


def fuzz_programs(rng, n: int, timeout_s: float) -> list[Tally]:
    """Each program through three tallies: ``sim.run``, with ``check_races``, the cycle model."""
    runs = {
        "sim.run": lambda p: sim.run(p, LIMITS),
        "races": lambda p: sim.run(p, LIMITS, check_races=True),
        "cycles": sim.run_cycles,
    }
    tallies = {name: Tally(name) for name in runs}
    for i in range(n):
        seed = int(rng.integers(0, 1 << 62))
        try:
            p = random_case_program(np.random.default_rng(seed))
        except PyvtaError:  # e.g. a flipped bit in a valid program's instruction address
            continue
        if i and i % 10_000 == 0:
            bad = sum(len(t.tracebacks) + len(t.hangs) for t in tallies.values())
            print(f"  programs: {i} of {n}, {bad} tracebacks or hangs so far", flush=True)
        for name, fn in runs.items():
            tallies[name].insns += p.insn_count
            t0 = time.perf_counter()
            tallies[name].run(
                f"program seed {seed} (case {i})", lambda p=p, fn=fn: fn(p), timeout_s
            )
            tallies[name].wall_s += time.perf_counter() - t0
    return list(tallies.values())


# ---- ONNX models and artifacts ---------------------------------------------------------------


def tiny_model(seed: int):
    """conv-relu-conv-add-relu-pool-flatten-gemm on a 1x3x8x8 input (compiles in well under 1 s)."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)

    def init(name, *shape):
        a = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        return numpy_helper.from_array(a, name)

    inits = [init("w1", 16, 3, 3, 3), init("b1", 16), init("w2", 16, 16, 3, 3), init("b2", 16)]
    inits += [init("wf", 4, 16), init("bf", 4)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph(nodes, "tiny", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


OP_CHOICES = ("Conv", "Relu", "Add", "Gemm", "MatMul", "Flatten", "Reshape", "Concat", "Clip",
              "MaxPool", "AveragePool", "GlobalAveragePool", "Softmax", "BatchNormalization",
              "LSTM", "Celu", "Identity", "Mul")  # fmt: skip


def mutate_model(model, rng):
    """A structurally edited copy of ``model`` (one to three edits)."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for _ in range(int(rng.integers(1, 4))):
        edit = int(rng.integers(0, 12))
        nodes = list(g.node)
        node = g.node[int(rng.integers(0, len(nodes)))] if nodes else None
        if edit == 0 and node is not None and node.attribute:
            a = node.attribute[int(rng.integers(0, len(node.attribute)))]
            if a.ints:
                a.ints[int(rng.integers(0, len(a.ints)))] = int(rng.integers(-3, 20))
            else:
                a.i = int(rng.integers(-3, 20))
        elif edit == 1 and node is not None and node.input:
            del node.input[int(rng.integers(0, len(node.input)))]
        elif edit == 2 and node is not None:
            node.input.append(str(rng.choice(["x", "w1", "nowhere", ""])))
        elif edit == 3 and node is not None:
            node.op_type = str(rng.choice(OP_CHOICES))
        elif edit == 4 and g.initializer:
            i = int(rng.integers(0, len(g.initializer)))
            old = numpy_helper.to_array(g.initializer[i])
            choice = int(rng.integers(0, 5))
            if choice == 0:
                new = np.full(old.shape, rng.choice([np.nan, np.inf, -np.inf, 1e30]), old.dtype)
            elif choice == 1:
                shape = tuple(int(v) for v in rng.integers(0, 5, rng.integers(0, 5)))
                new = rng.standard_normal(shape).astype(np.float32)
            elif choice == 2:
                new = old.astype(rng.choice([np.float64, np.int32, np.int8, np.float16]))
            elif choice == 3:
                new = np.zeros((0,), np.float32)
            else:
                new = old.reshape(-1)
            g.initializer[i].CopyFrom(numpy_helper.from_array(new, g.initializer[i].name))
        elif edit == 5 and g.input:
            dims = g.input[0].type.tensor_type.shape.dim
            if dims:
                d = dims[int(rng.integers(0, len(dims)))]
                v = rng.choice([0, -1, 1, 2, 7, 1 << 20, None])
                if v is None:
                    d.dim_param = "N"
                else:
                    d.dim_value = int(v)
        elif edit == 6 and len(nodes) > 1:
            del g.node[int(rng.integers(0, len(nodes)))]
        elif edit == 7 and len(nodes) > 1:
            order = rng.permutation(len(nodes))
            g.ClearField("node")
            g.node.extend([nodes[j] for j in order])
        elif edit == 8 and node is not None and node.output:
            node.output[0] = str(rng.choice(["x", "y", "c1", "renamed"]))
        elif edit == 9:
            g.output.append(helper.make_tensor_value_info("ghost", onnx.TensorProto.FLOAT, [1]))
        elif edit == 10:
            m.opset_import[0].version = int(rng.choice([1, 6, 9, 11, 13, 17, 21, 99]))
        elif node is not None:
            node.domain = str(rng.choice(["", "ai.onnx", "com.microsoft"]))
    return m


def corrupt_bytes(data: bytes, rng) -> bytes:
    kind = int(rng.integers(0, 4))
    if kind == 0:
        return data[: int(rng.integers(0, len(data)))]
    if kind == 1:
        return bytes(rng.integers(0, 256, int(rng.integers(0, 256)), dtype=np.uint8))
    buf = bytearray(data)
    for _ in range(int(rng.integers(1, 16))):
        buf[int(rng.integers(0, len(buf)))] = int(rng.integers(0, 256))
    if kind == 3:
        buf = buf + bytes(rng.integers(0, 256, 64, dtype=np.uint8))
    return bytes(buf)


def fuzz_models(rng, n: int, folder: Path, timeout_s: float) -> Tally:
    from pyvta.compiler.graph import import_onnx, zoo
    from pyvta.compiler.graph.compile import compile_model

    bases = [tiny_model(s) for s in range(3)]
    bases.append(zoo.resnet(18, size=32, width=8, classes=10, seed=2))
    t = Tally("models")
    t0 = time.perf_counter()
    path = folder / "m.onnx"
    for i in range(n):
        base = bases[-1] if i % 40 == 39 else bases[i % 3]  # one resnet in 40 (slower)
        if rng.random() < 0.7:
            data = mutate_model(base, rng).SerializeToString()
        else:
            data = corrupt_bytes(base.SerializeToString(), rng)
        target = str(rng.choice(fuzzed_targets()))

        def case(data=data, target=target):
            path.write_bytes(data)
            import_onnx(path)
            compile_model(path, target)

        t.run(f"model case {i} ({target}, {len(data)} bytes)", case, timeout_s)
    t.wall_s = time.perf_counter() - t0
    return t


def mutate_artifact(data: bytes, rng) -> bytes:
    """Flip bytes of the .npz, or rewrite it with one entry removed, retyped or reshaped, or
    its graph JSON edited."""
    if rng.random() < 0.4:
        return corrupt_bytes(data, rng)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    keys = sorted(arrays)
    k = str(rng.choice(keys))
    kind = int(rng.integers(0, 5))
    if kind == 0:
        del arrays[k]
    elif kind == 1 and arrays[k].dtype.kind in "iufb":  # not the graph JSON or its digest
        arrays[k] = arrays[k].astype(rng.choice([np.float64, np.int8, np.int64, np.float32]))
    elif kind == 2 and arrays[k].dtype.kind in "iufb":
        arrays[k] = arrays[k].reshape(-1)[: max(arrays[k].size - 1, 0)]
    elif kind == 3 and arrays[k].dtype.kind in "iuf":
        a = arrays[k].copy()
        if a.size:
            a.reshape(-1)[int(rng.integers(0, a.size))] = (
                np.nan if a.dtype.kind == "f" else np.iinfo(a.dtype).max
            )
        arrays[k] = a
    else:
        text = str(arrays["__graph__"])
        pos = int(rng.integers(0, max(len(text), 1)))
        repl = str(rng.choice(["0", "-1", "null", '"x"', "[]", "{}", "99999999", ""]))
        arrays["__graph__"] = np.array(text[:pos] + repl + text[pos + 1 :])
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def fuzz_artifacts(rng, n: int, folder: Path, timeout_s: float) -> list[Tally]:
    """Each mutated artifact loaded and run twice: through ``CompiledModel.load`` (the API) and
    through what ``pyvta run`` calls (``commands.network.compile_for``)."""
    import onnx

    from pyvta.commands.network import compile_for
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.runtime.compiled_model import CompiledModel, run_model

    src = folder / "tiny.onnx"
    onnx.save(tiny_model(0), src)
    originals = {}
    for target in fuzzed_targets():
        p = folder / f"tiny.{target}.npz"
        compile_model(src, target).save(p)
        originals[target] = p.read_bytes()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    api, cli = Tally("artifact API"), Tally("artifact CLI")
    path = folder / "a.npz"

    def via_cli(target: str) -> None:
        run_model(compile_for(path, target, log=lambda *a: None), x)

    for i in range(n):
        target = str(rng.choice(sorted(originals)))
        path.write_bytes(mutate_artifact(originals[target], rng))
        t0 = time.perf_counter()
        api.run(f"artifact case {i} ({target})", lambda: run_model(CompiledModel.load(path), x),
                timeout_s)  # fmt: skip
        t1 = time.perf_counter()
        cli.run(f"artifact case {i} ({target})", lambda t=target: via_cli(t), timeout_s)
        api.wall_s += t1 - t0
        cli.wall_s += time.perf_counter() - t1
    return [api, cli]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=int, default=100_000)
    ap.add_argument("--programs", type=int, default=100_000)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--artifacts", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per program case")
    ap.add_argument("--model-timeout", type=float, default=120.0, help="seconds per model case")
    ap.add_argument("--show", type=int, default=3, help="tracebacks printed per campaign")
    args = ap.parse_args(argv)
    print(f"fuzz: seed {args.seed}")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > MEMORY_LIMIT_BYTES:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, hard))
    signal.signal(signal.SIGALRM, _alarm)
    warnings.simplefilter("ignore")  # numpy overflow warnings of random data are expected
    rng = np.random.default_rng(args.seed)
    tallies = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pyvta_fuzz_") as tmp:
        folder = Path(tmp)
        for name, run in (
            ("words", lambda: fuzz_words(rng, args.words)),
            ("programs", lambda: fuzz_programs(rng, args.programs, args.timeout)),
            ("models", lambda: fuzz_models(rng, args.models, folder, args.model_timeout)),
            ("artifacts", lambda: fuzz_artifacts(rng, args.artifacts, folder, args.model_timeout)),
        ):
            if getattr(args, name) <= 0:
                continue
            result = run()
            for tally in result if isinstance(result, list) else [result]:
                tallies.append(tally)
                print(tally.summary(), flush=True)
                for what, tb in tally.tracebacks[: args.show]:
                    print(f"--- traceback: {what}\n{tb}")
                for what in tally.hangs[: args.show]:
                    print(f"--- hang: {what}")
    bad = sum(len(t.tracebacks) + len(t.hangs) for t in tallies)
    total = sum(t.n for t in tallies)
    print(
        f"total: {total} cases in {time.perf_counter() - t0:.1f} s;"
        f" {sum(len(t.tracebacks) for t in tallies)} tracebacks,"
        f" {sum(len(t.hangs) for t in tallies)} hangs"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
