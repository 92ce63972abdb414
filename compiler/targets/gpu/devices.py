"""The devices that run the ``gpu`` target's layers: one table, asked instead of their names.

Each device is also the code-generation backend its kernels are built with
(``compiler.build(..., target=device.name)``, ``compiler.backend.TARGETS``) and the ``target`` of
the GPU tuning templates (``tuner.cuda``). Importing this module imports nothing else of ours
(the target's folder lists its devices without loading the code generator).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyvta.isa.errors import PyvtaError


class GpuDeviceError(PyvtaError, ValueError):
    """A name that is not one of :data:`DEVICES`."""


@dataclass(frozen=True)
class GpuDevice:
    """``name``: the ``--device`` (and the backend's) name; ``on_gpu``: the model's PTX runs on
    an NVIDIA GPU through the CUDA driver (so it needs the driver, and an artifact with PTX), else
    the same lowered kernels run on the CPU with GPU semantics; ``what``: one line for help."""

    name: str
    on_gpu: bool
    what: str


DEVICES: tuple[GpuDevice, ...] = (
    GpuDevice("cuda", True, "an NVIDIA GPU: the model's PTX through the CUDA driver"),
    GpuDevice(
        "cuda-emulated",
        False,
        "the same lowered kernels as CPU code with GPU semantics (threads, barriers, races)",
    ),
)
"""The first is the default."""

NAMES: tuple[str, ...] = tuple(d.name for d in DEVICES)


def gpu_device(name: str | None = None) -> GpuDevice:
    """The device called ``name`` (None: the default, the first); ``GpuDeviceError`` naming
    those there are for any other."""
    if name is None:
        return DEVICES[0]
    for device in DEVICES:
        if device.name == name:
            return device
    raise GpuDeviceError(f"gpu device {name!r} (allowed: {', '.join(NAMES)})")
