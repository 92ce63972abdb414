"""GPU schedule templates: schedule functions whose knobs (block shape, register and shared
tiles) are parameters, so a tuner can search over them. Each returns ``(schedule, argument
tensors)``, to build with ``target="cuda"`` or ``"cuda-emulated"``."""

from pyvta.compiler.ops.cuda.conv2d import (
    GpuConv2dKnobs,
    conv2d_gpu,
    conv2d_implicit_gemm,
    depthwise_conv2d_gpu,
)
from pyvta.compiler.ops.cuda.elementwise import (
    avg_pool2d_gpu,
    bias_relu_gpu,
    elementwise_gpu,
    global_avg_pool_gpu,
    max_pool2d_gpu,
)
from pyvta.compiler.ops.cuda.epilogue import Epilogue
from pyvta.compiler.ops.cuda.gemm import GpuGemmKnobs, dense_gpu, gemm
from pyvta.compiler.ops.cuda.softmax import softmax_gpu

__all__ = [
    "Epilogue",
    "GpuConv2dKnobs",
    "GpuGemmKnobs",
    "avg_pool2d_gpu",
    "bias_relu_gpu",
    "conv2d_gpu",
    "conv2d_implicit_gemm",
    "dense_gpu",
    "depthwise_conv2d_gpu",
    "elementwise_gpu",
    "gemm",
    "global_avg_pool_gpu",
    "max_pool2d_gpu",
    "softmax_gpu",
]
