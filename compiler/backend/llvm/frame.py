"""LLVM types of our dtypes and the per-function code-generation state."""

from __future__ import annotations

from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
I8P = I8.as_pointer()
LLTYPE = {"bool": I1, "int8": I8, "int32": I32, "int64": I64, "float32": F32}
MEM_TYPE = {**LLTYPE, "bool": I8}
ELEM_BYTES = {"bool": 1, "int8": 1, "int32": 4, "int64": 8, "float32": 4}


class FnState:
    """Per-LLVM-function state: builder, entry block for allocas, bindings."""

    def __init__(self, fn: ir.Function):
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(self.entry)
        body = fn.append_basic_block("body")
        self.builder.position_at_end(body)
        self.body_start = body
        self.vars: dict = {}
        self.bufs: dict = {}
