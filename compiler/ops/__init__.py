"""Operator library: tensor-expression declarations of common DNN operators."""

from pyvta.compiler.ops.conv2d import conv2d_nchw, conv2d_nchwc
from pyvta.compiler.ops.dense import dense, matmul
from pyvta.compiler.ops.elementwise import add, bias_add, cast, relu
from pyvta.compiler.ops.layout import pack_nchwc, pack_oihw, unpack_nchwc
from pyvta.compiler.ops.pad import pad
from pyvta.compiler.ops.pool import global_avg_pool2d, max_pool2d
from pyvta.compiler.ops.quantize import requantize

__all__ = [
    "add",
    "bias_add",
    "cast",
    "conv2d_nchw",
    "conv2d_nchwc",
    "dense",
    "global_avg_pool2d",
    "matmul",
    "max_pool2d",
    "pack_nchwc",
    "pack_oihw",
    "pad",
    "relu",
    "requantize",
    "unpack_nchwc",
]
