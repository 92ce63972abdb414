"""Devices found by name: ``open("sim")``, ``open("rtl:icarus")``, ``open("tcp://host:port")``.

A backend is one module ``pyvta.driver.ops_<kind>`` whose ``DEVICE`` is a ``Device`` subclass; the
part of the name after ``:`` is its variant (``tcp://HOST:PORT`` is kind ``tcp``, variant
``HOST:PORT``). Nothing is imported until a device is opened.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pyvta.driver.device import Device, DeviceError

_PREFIX = "ops_"


def device_kinds() -> tuple[str, ...]:
    """The backend names this installation has (one per ``ops_<kind>.py``)."""
    here = Path(__file__).parent
    return tuple(sorted(p.stem[len(_PREFIX) :] for p in here.glob(f"{_PREFIX}*.py")))


def parse_name(name: str) -> tuple[str, str | None]:
    """``"rtl:icarus"`` -> ("rtl", "icarus"); ``"tcp://h:1"`` -> ("tcp", "h:1"); ``"sim"`` -> ("sim", None)."""
    if not isinstance(name, str) or not name:
        raise DeviceError(f"a device name is a non-empty string, got {name!r}")
    if "://" in name:
        kind, variant = name.split("://", 1)
    else:
        kind, _, variant = name.partition(":")
    return kind, (variant or None)


def open_device(name: str, **kwargs) -> Device:
    """The device called ``name``; ``kwargs`` go to its backend (``config=``, ``key_file=``, ...)."""
    kind, variant = parse_name(name)
    return _backend(kind, name).open(variant, **kwargs)


def device_class(name: str) -> type[Device]:
    """The backend (a ``Device`` class) a device name opens: what a command asks before
    opening it (``options``, ``remote``)."""
    return _backend(parse_name(name)[0], name)


def device_options(name: str) -> frozenset[str]:
    """The keyword options ``open_device(name, ...)`` takes (``Device.options``): ``trace`` for
    the simulator, ``bitstream`` for a board, ``key_file`` for a served device, ..."""
    kind, variant = parse_name(name)
    return _backend(kind, name).options(variant)


def _backend(kind: str, name: str) -> type[Device]:
    """The ``Device`` class of backend ``kind`` (parsed from the device name ``name``)."""
    kinds = device_kinds()
    if kind not in kinds:
        raise DeviceError(f"unknown device {name!r} (devices: {', '.join(kinds)})")
    return importlib.import_module(f"pyvta.driver.{_PREFIX}{kind}").DEVICE
