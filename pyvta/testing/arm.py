"""Running pyvta on the emulated ARM userlands (``scripts/arm_userland.sh``) from the host.

    python = arm_python("armhf")               # builds or reuses the root file system
    site = pyvta_site(tmp)                     # this checkout's wheel, unpacked (no extras)
                                               # (python -m pyvta.testing.arm --site DIR: the same)
    run_on_arm(python, site, "a.npz", x, out)  # one inference there -> (output, report)

On the ARM side (``python -m pyvta.testing.arm ARTIFACT X.npy OUT.npy [numpy] [--device NAME]``)
an artifact is run once, with the kernels of its shared object (or, given ``numpy``, without
them; its accelerator nodes on the device NAME, e.g. ``sim``), and a report line says what ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the checkout (scripts/ beside pyvta/)


def arm_python(arch: str) -> Path:
    """The ARM python of ``arch`` (armhf, arm64): ``scripts/arm_userland.sh ARCH``'s answer."""
    script = ROOT / "scripts" / "arm_userland.sh"
    if not script.exists():
        raise FileNotFoundError(
            f"{script}: run from a checkout of pyvta (scripts/ is not installed)"
        )
    out = subprocess.run(["bash", str(script), arch], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def pyvta_site(folder: Path) -> Path:
    """This checkout's wheel (no extras) unpacked into ``folder/site`` for PYTHONPATH. The wheel
    is built from a copy of the files git tracks or would track (a ``build/`` folder left in
    the checkout by an earlier build could bring modules that no longer exist)."""
    import shutil
    import zipfile

    folder = Path(folder)
    src, wheels = folder / "src", folder / "wheel"
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
         "-w", str(wheels), str(src)],
        check=True, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    site = folder / "site"
    with zipfile.ZipFile(next(wheels.glob("pyvta-*.whl"))) as z:
        z.extractall(site)
    return site


def agreement(a: np.ndarray, b: np.ndarray) -> str:
    """How an ARM run's output ``a`` agrees with another's ``b``: "bit-identical", or the
    largest difference relative to ``b``'s largest magnitude."""
    if np.array_equal(a, b):
        return "bit-identical"
    return f"max|diff|/max {float(np.abs(a - b).max() / np.abs(b).max()):.2e}"


def run_on_arm(
    python: Path,
    site: Path,
    artifact: Path,
    x: np.ndarray,
    out: Path,
    numpy: bool = False,
    device: str | None = None,
) -> tuple[np.ndarray, dict]:
    """One inference of ``artifact`` on ``x`` under ``python`` (its accelerator nodes on
    ``device``, a ``driver.open`` name, where given): its output and the report."""
    np.save(out.with_suffix(".x.npy"), x)
    cmd = [str(python), "-m", "pyvta.testing.arm", str(artifact), str(out.with_suffix(".x.npy"))]
    cmd += [str(out)] + (["numpy"] if numpy else []) + (["--device", device] if device else [])
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out.parent)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return np.load(out), json.loads(proc.stdout.strip().splitlines()[-1])


def _main(argv: list[str]) -> None:
    import platform

    if argv[:1] == ["--site"]:  # scripts/board_test.sh: the wheel for the ARM userlands
        print(pyvta_site(Path(argv[1])))
        return

    from pyvta.runtime.compiled_model import CompiledModel, run_model

    artifact, x_path, out = argv[:3]
    flags = argv[3:]
    cm = CompiledModel.load(artifact)
    if "numpy" in flags:
        cm.cpu_code = None
    device = None
    if "--device" in flags:
        from pyvta import driver

        device = driver.open(flags[flags.index("--device") + 1], config=cm.hw)
    x = np.load(x_path)
    t0 = time.perf_counter()
    (y,), _ = run_model(cm, x, device=device)
    seconds = time.perf_counter() - t0
    backend = cm.cpu_backend()
    kernels = {**getattr(backend, "kernels", {}), **getattr(backend, "modules", {})}
    if hasattr(backend, "fallback"):
        kernels.update(backend.fallback.modules)
    np.save(out, y)
    report = {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu_code": cm.cpu_code.description if cm.cpu_code else None,
        "shared_kernels": len(kernels),
        "seconds": round(seconds, 2),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    _main(sys.argv[1:])
