"""The VTA backend: conv2d/dense templates lowered to instruction streams with automatic
dependency tokens and virtual threading."""

from pyvta.compiler.backend.vta.config import ConvConfig, FitError, check_fit, config_space
from pyvta.compiler.backend.vta.conv2d import DramMap, LoweredConv, lower_conv2d
from pyvta.compiler.backend.vta.default import default_config, estimate_cycles, ranked_configs
from pyvta.compiler.backend.vta.deps import insert_dep_tokens
from pyvta.compiler.backend.vta.operator import VtaConv2d
from pyvta.compiler.backend.vta.packing import pack_bias, pack_data, pack_weights, unpack_data
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue, WorkloadError

__all__ = [
    "ConvConfig",
    "ConvWorkload",
    "DramMap",
    "Epilogue",
    "FitError",
    "LoweredConv",
    "VtaConv2d",
    "WorkloadError",
    "check_fit",
    "config_space",
    "default_config",
    "estimate_cycles",
    "insert_dep_tokens",
    "lower_conv2d",
    "pack_bias",
    "pack_data",
    "pack_weights",
    "ranked_configs",
    "unpack_data",
]
