"""CPU schedule templates: schedule functions whose knobs (tile sizes, ...) are parameters, so a
tuner can search over them. Each returns ``(schedule, argument tensors)``."""

from pyvta.compiler.ops.cpu.conv2d import Conv2dKnobs, conv2d_nchw_blocked
from pyvta.compiler.ops.cpu.gemm import GemmKnobs, matmul_packed
from pyvta.compiler.ops.cpu.winograd import WinogradKnobs, conv2d_winograd

__all__ = [
    "Conv2dKnobs",
    "GemmKnobs",
    "WinogradKnobs",
    "conv2d_nchw_blocked",
    "conv2d_winograd",
    "matmul_packed",
]
