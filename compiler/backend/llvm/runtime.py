"""Parallel runtime: a persistent pool of POSIX threads, written in LLVM IR and JIT-compiled once
per process (on first use, never at import).

Kernels call ``void pyvta_parallel_launch(i8* (i8*)* fn, i8* arg, i32 nthreads)``: the caller
and up to ``nthreads - 1`` pool workers each run ``fn(arg)``; ``fn`` takes chunks of iterations
from an atomic counter in ``arg`` until none are left, so any number of participants is correct.
A worker joins a launch only while it is open: when the caller's own ``fn(arg)`` returns (no
chunk left) it closes the launch and waits only for the workers that joined, so a worker the
OS has not scheduled (a busy, shared machine) never delays a launch.
Workers spin briefly after a task (a following launch then starts at once), yielding the core
now and then (``SPIN_YIELD_MASK``), and then sleep on a condition variable; the launcher likewise
spins for the workers to finish before it sleeps. ``set_spin_iters`` / ``set_spin_yield`` change
the two for the process (to compare them in one run).
Launches are serialised by a lock, so kernels may be called from several
Python threads; a process forked after the pool started gets a fresh pool on its first launch.

When a launch's threads cover every CPU the process may run on, each worker it starts binds
itself to one CPU, and ``caller_bound`` binds the thread that launches to another while a
network runs (``cpu_plan``: the first CPU to the caller, the next ones to the workers), unless
``PIN_ENV`` is ``0`` or the process has one CPU. (With fewer threads than CPUs nothing is bound:
threads bound to a few CPUs would stay there while other processes crowd them and the other
CPUs idle.) Left free, a worker woken by the caller could be queued on the caller's CPU and the two
stay there for a whole inference (the scheduler does not move a thread that has just run):
on a 2-vCPU host (Zen 1, KVM), MobileNet on 2 threads ran 17.4 ms back to back but 28.5 ms
(median of 15) when two Python threads had run between the inferences; 20.0 ms with only the
workers bound (the caller then lands on a worker's CPU), 18.7 ms with both
(``benchmarks/cpu_pool_pinning.py``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

LAUNCH_SYMBOL = "pyvta_parallel_launch"
SPIN_SYMBOL = "pyvta_spin_iters"  # the runtime's spin count (i32), SPIN_ITERS at start
YIELD_SYMBOL = "pyvta_spin_yield"  # its yield mask (i32), SPIN_YIELD_MASK at start
# Spin iterations before a thread sleeps on a condition variable (a load and a compare each;
# 1,000,000 is about 1 ms on the development host). Long enough to bridge the gaps between
# launches (the caller's Python, serial packing loops, the graph executor's per-node work of
# tens of microseconds). With 20,000 (about 20 us), a tuned GEMM 512^3 on a 2-vCPU VM ran about
# 15% slower for seconds at a time, its threads sleeping and being woken once or twice per call.
# Spinning too long costs on a shared machine: a thread that spins burns its share of the CPU,
# so the scheduler runs it later when it has work. ResNet-18 on 2 threads at load average 6-8
# (benchmarks/cpu_network.py, 5-6 runs each, interleaved): 1,000,000 -> 0.58-0.73x
# onnxruntime, 100,000 -> 0.86-0.93x, 20,000 -> 0.77-1.16x.
SPIN_ITERS = 100_000
# A spinning thread calls sched_yield() every SPIN_YIELD_MASK + 1 iterations (0: never): on an
# idle core it returns at once (a launch still starts within about a microsecond); on a shared
# machine the other runnable threads get the core and the spinner does not use up its share
# of it, so the scheduler does not preempt it later mid-chunk, when the launch waits for it.
# 13 generated nets on 2 threads at load average 14 (Zen 4, kernel 6.18, one process, 21
# interleaved runs, median; ratio onnxruntime / pyvta): no yield geomean 1.04, worst 0.36
# (medians of 2.7-10 ms for 0.5-1.5 ms nets); every 256: 1.34 / 0.90; every 4096: 1.53 / 0.72;
# no spinning at all: 1.56 / 0.88.
SPIN_YIELD_MASK = 1023
_SYNC_BYTES = 64  # >= sizeof(pthread_mutex_t) and sizeof(pthread_cond_t) on glibc
PIN_SYMBOL = "pyvta_worker_cpus"  # the CPU each worker binds itself to (i32 each; -1: none)
MIN_THREADS_SYMBOL = "pyvta_bind_min_threads"  # (i32) a launch of fewer threads binds none
NOOP_SYMBOL = "pyvta_noop_task"  # a task with nothing to do (``start_pool`` launches it)
NEVER = 2**31 - 1  # a thread count no launch reaches (MIN_THREADS_SYMBOL's: nothing bound)
PIN_ENV = "PYVTA_PIN_THREADS"  # "0": neither the workers nor the caller are bound to CPUs
PINNED_WORKERS = 256  # workers with an entry in PIN_SYMBOL's table (the others are not bound)
CPU_SET_WORDS = 16  # glibc's cpu_set_t: 1024 CPUs, in 64-bit words

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
I8P = I8.as_pointer()
TASK = ir.FunctionType(I8P, [I8P]).as_pointer()


def _global(mod, name, ty, init):
    g = ir.GlobalVariable(mod, ty, name)
    g.initializer = init
    g.align = 16
    return g


def _runtime_module(bind: bool = True) -> ir.Module:
    """The pool; ``bind``: its workers bind themselves to CPUs (``PIN_SYMBOL``; the call is
    left out where the OS has no ``sched_setaffinity``)."""
    mod = ir.Module(name="pyvta_runtime")
    sync = ir.ArrayType(I8, _SYNC_BYTES)
    zero = ir.Constant(sync, None)
    mu, launch_mu = _global(mod, "mu", sync, zero), _global(mod, "launch_mu", sync, zero)
    cv_work, cv_done = _global(mod, "cv_work", sync, zero), _global(mod, "cv_done", sync, zero)
    gen = _global(mod, "gen", I64, ir.Constant(I64, 0))
    task_fn = _global(mod, "task_fn", TASK, ir.Constant(TASK, None))
    task_arg = _global(mod, "task_arg", I8P, ir.Constant(I8P, None))
    limit = _global(mod, "limit", I32, ir.Constant(I32, 0))
    pending = _global(mod, "pending", I32, ir.Constant(I32, 0))
    closed = _global(mod, "closed", I32, ir.Constant(I32, 0))
    nworkers = _global(mod, "nworkers", I32, ir.Constant(I32, 0))
    owner = _global(mod, "owner_pid", I32, ir.Constant(I32, 0))
    spin_iters = _global(mod, SPIN_SYMBOL, I32, ir.Constant(I32, SPIN_ITERS))
    spin_yield = _global(mod, YIELD_SYMBOL, I32, ir.Constant(I32, SPIN_YIELD_MASK))
    pin_ty = ir.ArrayType(I32, PINNED_WORKERS)
    pin_cpus = _global(mod, PIN_SYMBOL, pin_ty, ir.Constant(pin_ty, [-1] * PINNED_WORKERS))
    bind_min = _global(mod, MIN_THREADS_SYMBOL, I32, ir.Constant(I32, NEVER))

    def decl(name, ret, args):
        return ir.Function(mod, ir.FunctionType(ret, args), name=name)

    lock = decl("pthread_mutex_lock", I32, [I8P])
    unlock = decl("pthread_mutex_unlock", I32, [I8P])
    wait = decl("pthread_cond_wait", I32, [I8P, I8P])
    broadcast = decl("pthread_cond_broadcast", I32, [I8P])
    signal = decl("pthread_cond_signal", I32, [I8P])
    worker_ty = ir.FunctionType(I8P, [I8P])
    create = decl("pthread_create", I32, [I8P, I8P, worker_ty.as_pointer(), I8P])
    detach = decl("pthread_detach", I32, [I64])
    getpid = decl("getpid", I32, [])
    sched_yield = decl("sched_yield", I32, [])

    def maybe_yield(b, n):
        """sched_yield() on the spin iterations whose count has every bit of the mask set."""
        mask = b.load(spin_yield)
        hit = b.and_(
            b.icmp_unsigned("!=", mask, ir.Constant(I32, 0)),
            b.icmp_unsigned("==", b.and_(n, mask), mask),
        )
        with b.if_then(hit):
            b.call(sched_yield, [])

    def p(g):
        return g.bitcast(I8P)

    # -- worker(arg): arg packs (bind << 63) | (index << 32) | generation-at-creation
    worker = ir.Function(mod, worker_ty, name="pyvta_worker")
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    packed = b.ptrtoint(worker.args[0], I64)
    index = b.trunc(b.and_(b.lshr(packed, ir.Constant(I64, 32)), ir.Constant(I64, 2**31 - 1)), I32)
    binds = b.icmp_unsigned("!=", b.lshr(packed, ir.Constant(I64, 63)), ir.Constant(I64, 0))
    my = b.alloca(I64)
    b.store(b.and_(packed, ir.Constant(I64, 0xFFFFFFFF)), my)
    spin_ctr = b.alloca(I32)
    if bind:
        set_affinity = decl("sched_setaffinity", I32, [I32, I64, I8P])
        cpu_set = b.alloca(ir.ArrayType(I64, CPU_SET_WORDS))
        with b.if_then(binds):
            _bind_to_cpu(b, index, pin_cpus, cpu_set, set_affinity)
    spin, locked, waitb, run, done = (
        worker.append_basic_block(n) for n in ("spin", "locked", "wait", "run", "done")
    )
    b.store(ir.Constant(I32, 0), spin_ctr)
    b.branch(spin)
    # spin a while on the generation counter before sleeping
    b.position_at_end(spin)
    n = b.load(spin_ctr)
    b.store(b.add(n, ir.Constant(I32, 1)), spin_ctr)
    maybe_yield(b, n)
    g = b.load_atomic(gen, "acquire", 8)
    keep = b.and_(b.icmp_unsigned("==", g, b.load(my)), b.icmp_signed("<", n, b.load(spin_iters)))
    b.cbranch(keep, spin, locked)
    b.position_at_end(locked)
    b.call(lock, [p(mu)])
    b.branch(waitb)
    b.position_at_end(waitb)
    g = b.load(gen)
    with b.if_then(b.icmp_unsigned("==", g, b.load(my))):
        b.call(wait, [p(cv_work), p(mu)])
    g2 = b.load(gen)
    b.cbranch(b.icmp_unsigned("==", g2, b.load(my)), waitb, run)
    b.position_at_end(run)
    b.store(g2, my)
    fn, arg = b.load(task_fn), b.load(task_arg)
    # join only a launch still open: once the launcher has run out of chunks it closes the
    # launch and waits for the workers that joined, not for one that was not scheduled
    open_ = b.icmp_signed("==", b.load(closed), ir.Constant(I32, 0))
    takes_part = b.and_(b.icmp_signed("<", index, b.load(limit)), open_)
    with b.if_then(takes_part):
        b.store(b.add(b.load(pending), ir.Constant(I32, 1)), pending)
    b.call(unlock, [p(mu)])
    with b.if_then(takes_part):
        b.call(fn, [arg])
        b.call(lock, [p(mu)])
        left = b.sub(b.load(pending), ir.Constant(I32, 1))
        b.store_atomic(left, pending, "release", 4)  # the launcher spins on it (below)
        with b.if_then(b.icmp_signed("==", left, ir.Constant(I32, 0))):
            b.call(signal, [p(cv_done)])
        b.call(unlock, [p(mu)])
    b.store(ir.Constant(I32, 0), spin_ctr)
    b.branch(spin)
    b.position_at_end(done)
    b.ret(ir.Constant(I8P, None))

    # -- launch(fn, arg, nthreads)
    launch = ir.Function(mod, ir.FunctionType(ir.VoidType(), [TASK, I8P, I32]), LAUNCH_SYMBOL)
    fn_a, arg_a, nthreads = launch.args
    b = ir.IRBuilder(launch.append_basic_block("entry"))
    tid = b.alloca(I64)
    # after a fork() the child has none of the parent's workers: start a fresh pool
    pid = b.call(getpid, [])
    with b.if_then(b.icmp_signed("!=", pid, b.load(owner))):
        for g in (mu, launch_mu, cv_work, cv_done):
            b.store(zero, g)
        b.store(ir.Constant(I32, 0), nworkers)
        b.store(pid, owner)
    b.call(lock, [p(launch_mu)])
    want = b.sub(nthreads, ir.Constant(I32, 1))
    grow, grown = launch.append_basic_block("grow"), launch.append_basic_block("grown")
    b.branch(grow)
    b.position_at_end(grow)
    have = b.load(nworkers)
    more = launch.append_basic_block("more")
    b.cbranch(b.icmp_signed("<", have, want), more, grown)
    b.position_at_end(more)
    b.call(lock, [p(mu)])
    cur = b.load(gen)
    b.call(unlock, [p(mu)])
    word = b.or_(b.shl(b.zext(have, I64), ir.Constant(I64, 32)), cur)
    covers = b.icmp_signed(">=", nthreads, b.load(bind_min))  # the launch covers the CPUs
    word = b.or_(word, b.shl(b.zext(covers, I64), ir.Constant(I64, 63)))
    b.call(create, [b.bitcast(tid, I8P), ir.Constant(I8P, None), worker, b.inttoptr(word, I8P)])
    b.call(detach, [b.load(tid)])
    b.store(b.add(have, ir.Constant(I32, 1)), nworkers)
    b.branch(grow)
    b.position_at_end(grown)
    b.call(lock, [p(mu)])
    b.store(fn_a, task_fn)
    b.store(arg_a, task_arg)
    b.store(want, limit)
    b.store(ir.Constant(I32, 0), pending)
    b.store(ir.Constant(I32, 0), closed)
    b.store_atomic(b.add(b.load(gen), ir.Constant(I64, 1)), gen, "release", 8)
    b.call(broadcast, [p(cv_work)])
    b.call(unlock, [p(mu)])
    b.call(fn_a, [arg_a])
    b.call(lock, [p(mu)])
    b.store(ir.Constant(I32, 1), closed)  # every chunk is taken: no worker joins from now on
    b.call(unlock, [p(mu)])
    # spin a while for the workers to finish before sleeping: a futex wake-up costs more
    # than the tail of a balanced parallel loop
    ctr = b.alloca(I32)
    b.store(ir.Constant(I32, 0), ctr)
    spin_done, spun = launch.append_basic_block("spin_done"), launch.append_basic_block("spun")
    b.branch(spin_done)
    b.position_at_end(spin_done)
    n = b.load(ctr)
    b.store(b.add(n, ir.Constant(I32, 1)), ctr)
    maybe_yield(b, n)
    busy = b.icmp_signed(">", b.load_atomic(pending, "acquire", 4), ir.Constant(I32, 0))
    b.cbranch(b.and_(busy, b.icmp_signed("<", n, b.load(spin_iters))), spin_done, spun)
    b.position_at_end(spun)
    b.call(lock, [p(mu)])
    waitd, fin = launch.append_basic_block("wait_done"), launch.append_basic_block("fin")
    b.branch(waitd)
    b.position_at_end(waitd)
    with b.if_then(b.icmp_signed(">", b.load(pending), ir.Constant(I32, 0))):
        b.call(wait, [p(cv_done), p(mu)])
    b.cbranch(b.icmp_signed(">", b.load(pending), ir.Constant(I32, 0)), waitd, fin)
    b.position_at_end(fin)
    b.call(unlock, [p(mu)])
    b.call(unlock, [p(launch_mu)])
    b.ret_void()

    noop = ir.Function(mod, TASK.pointee, NOOP_SYMBOL)
    ir.IRBuilder(noop.append_basic_block("entry")).ret(ir.Constant(I8P, None))
    return mod


def _bind_to_cpu(b: ir.IRBuilder, index, pin_cpus, cpu_set, set_affinity) -> None:
    """Bind the calling thread, worker ``index``, to its CPU in the ``pin_cpus`` table (none
    when the entry is -1, or the worker has no entry); ``cpu_set``: room for a cpu_set_t."""
    i64 = ir.Constant(I64, 0)
    with b.if_then(b.icmp_unsigned("<", index, ir.Constant(I32, PINNED_WORKERS))):
        cpu = b.load(b.gep(pin_cpus, [ir.Constant(I32, 0), index]))
        fits = b.icmp_unsigned("<", cpu, ir.Constant(I32, CPU_SET_WORDS * 64))  # -1 does not
        with b.if_then(fits):
            b.store(ir.Constant(cpu_set.type.pointee, None), cpu_set)
            word = b.gep(cpu_set, [i64, b.zext(b.lshr(cpu, ir.Constant(I32, 6)), I64)])
            bit = b.shl(ir.Constant(I64, 1), b.zext(b.and_(cpu, ir.Constant(I32, 63)), I64))
            b.store(bit, word)
            size = ir.Constant(I64, CPU_SET_WORDS * 8)
            b.call(set_affinity, [ir.Constant(I32, 0), size, b.bitcast(cpu_set, I8P)])


@dataclass(frozen=True)
class CpuPlan:
    """Where the pool's threads run: ``caller``, the CPU the thread that launches is bound to
    while a network runs (``caller_bound``); ``workers``, the CPU each worker binds itself to,
    by index; both only for launches of ``min_threads`` threads or more (those that cover every
    CPU the process may run on)."""

    caller: int | None = None
    workers: tuple[int, ...] = ()
    min_threads: int = NEVER

    def binds(self, threads: int) -> bool:
        """Whether a launch of ``threads`` threads binds them."""
        return self.caller is not None and threads >= self.min_threads


NO_PLAN = CpuPlan()  # nothing bound


def cpu_plan(allowed, pin: bool = True) -> CpuPlan:
    """The plan for a process that may run on the CPUs ``allowed`` (``os.sched_getaffinity``):
    the first to the caller, the second, the third, ... round again to the workers, for
    launches of as many threads as CPUs or more; ``NO_PLAN`` unless ``pin`` and two CPUs or
    more."""
    cpus = sorted(allowed)
    if not pin or len(cpus) < 2:
        return NO_PLAN
    workers = tuple(cpus[(k + 1) % len(cpus)] for k in range(PINNED_WORKERS))
    return CpuPlan(cpus[0], workers, len(cpus))


@cache
def ensure_runtime() -> int:
    """JIT the runtime once per process and make ``LAUNCH_SYMBOL`` resolvable by kernels."""
    from pyvta.compiler.backend.llvm.jit import JitFunction, optimize
    from pyvta.compiler.backend.llvm.target import CpuTarget

    target = CpuTarget.host(1)
    can_bind = hasattr(os, "sched_setaffinity")
    text = optimize(str(_runtime_module(can_bind)), target)
    jit = JitFunction(text, LAUNCH_SYMBOL, target)
    _KEEP.append(jit)
    for symbol in (SPIN_SYMBOL, YIELD_SYMBOL, PIN_SYMBOL, MIN_THREADS_SYMBOL):
        _CELLS[symbol] = jit.engine.get_global_value_address(symbol)
    _CELLS[NOOP_SYMBOL] = jit.engine.get_function_address(NOOP_SYMBOL)
    if can_bind:
        _set_plan(cpu_plan(os.sched_getaffinity(0), os.environ.get(PIN_ENV) != "0"))
    llvm.add_symbol(LAUNCH_SYMBOL, jit.address)
    return jit.address


_KEEP: list = []
_CELLS: dict[str, int] = {}  # the runtime's settings (SPIN_SYMBOL, ...) -> address


def start_pool(threads: int) -> None:
    """Start the pool's workers for launches of ``threads`` threads now (one launch of a task
    with nothing to do), where a model is loaded, so that its first inference does not: on a
    2-vCPU Zen 5 that first inference of a small network took ~1 ms more than the next ones
    (0.5 ms). Nothing for one thread; workers already started stay as they are."""
    if threads < 2:
        return
    import ctypes

    launch = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)
    launch(ensure_runtime())(_CELLS[NOOP_SYMBOL], None, threads)


_PLAN: list[CpuPlan] = [NO_PLAN]  # this process's (``set_cpu_plan``)


def _set_plan(plan: CpuPlan) -> CpuPlan:
    """Write ``plan`` into the runtime (the workers' table -1 past ``plan.workers``); returns
    the previous one."""
    import ctypes

    table = (ctypes.c_int32 * PINNED_WORKERS).from_address(_CELLS[PIN_SYMBOL])
    workers = list(plan.workers[:PINNED_WORKERS])
    table[:] = workers + [-1] * (PINNED_WORKERS - len(workers))
    ctypes.c_int32.from_address(_CELLS[MIN_THREADS_SYMBOL]).value = plan.min_threads
    prev, _PLAN[0] = _PLAN[0], plan
    return prev


def set_cpu_plan(plan: CpuPlan) -> CpuPlan:
    """Set this process's ``CpuPlan`` (``NO_PLAN``: nothing bound); returns the previous one.
    Workers already started keep their binding; new ones, and ``caller_bound``, use it."""
    ensure_runtime()
    return _set_plan(plan)


@contextlib.contextmanager
def caller_bound(threads: int):
    """The calling thread bound to the plan's CPU for the caller while the block runs (a
    network's inference, a kernel's timing, on ``threads`` threads), its own CPUs given back
    after; nothing when the plan does not bind ``threads`` threads (``CpuPlan.binds``) or the
    thread may not run on that CPU. (Threads that launch at the same time share that CPU for
    their own work; their launches are serialised anyway.)"""
    ensure_runtime()
    plan = _PLAN[0]
    mine = os.sched_getaffinity(0) if plan.binds(threads) else set()
    if plan.caller not in mine or mine == {plan.caller}:
        yield
        return
    os.sched_setaffinity(0, {plan.caller})
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def _set_cell(symbol: str, value: int) -> int:
    """Write one of the runtime's i32 settings for this process; returns the previous value."""
    import ctypes

    ensure_runtime()
    cell = ctypes.c_int32.from_address(_CELLS[symbol])
    prev, cell.value = cell.value, value
    return prev


def set_spin_iters(n: int) -> int:
    """Set the pool's spin count (iterations before a thread sleeps) for this process; returns
    the previous one."""
    return _set_cell(SPIN_SYMBOL, n)


def set_spin_yield(mask: int) -> int:
    """Set the pool's yield mask for this process (0: spinning threads never yield); returns
    the previous one."""
    return _set_cell(YIELD_SYMBOL, mask)
