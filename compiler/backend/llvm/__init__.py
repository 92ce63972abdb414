"""CPU backend: loop IR -> LLVM IR -> host machine code via llvmlite."""

from pyvta.compiler.backend.llvm.build import build_llvm
from pyvta.compiler.backend.llvm.module import Module
from pyvta.compiler.backend.llvm.target import CpuTarget, cpu_scopes

__all__ = ["CpuTarget", "Module", "build_llvm", "cpu_scopes"]
