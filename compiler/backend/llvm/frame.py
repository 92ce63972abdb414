"""LLVM types of our dtypes and the per-function code-generation state."""

from __future__ import annotations

from contextlib import contextmanager

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
        # an index's variable part, each prefix of its terms ((Var, coef) pairs) -> its value,
        # emitted once where it dominates the code that reuses it (``scope``)
        self.index_parts: dict = {}

    @contextmanager
    def scope(self):
        """Code emitted inside (a loop's body, a branch) does not dominate what follows it:
        the index parts emitted there are forgotten on the way out."""
        saved = self.index_parts
        self.index_parts = dict(saved)
        try:
            yield
        finally:
            self.index_parts = saved

    def affine_index(self, terms: list, const: int, values: list) -> ir.Value:
        """``sum(coef * var) + const`` in i32 (``terms``: ``[(var, coef)]``, ``values``: the
        variables' i32 values), each prefix of the sum emitted once in scope: an unrolled
        body's indices differ in their constant, so each costs one add, not a product and
        an add per term (LLVM would find the same, slower, on IR twice the size)."""
        b, parts = self.builder, self.index_parts
        key: tuple = ()
        out = None
        for (var, coef), value in zip(terms, values, strict=True):
            key += ((var, coef),)
            hit = parts.get(key)
            if hit is None:
                term = value if coef == 1 else b.mul(value, ir.Constant(I32, coef))
                hit = parts[key] = term if out is None else b.add(out, term)
            out = hit
        return out if const == 0 else b.add(out, ir.Constant(I32, const))

    def pointer(self, base: ir.Value, index: ir.Value, vector: ir.VectorType | None = None):
        """``&base[index]`` (``vector``: cast to a pointer to that vector type), emitted once in
        scope: an unrolled tile's accumulator is loaded and stored at the same places."""
        at = ("c", index.constant) if isinstance(index, ir.Constant) else index
        key = ("ptr", base, at, vector)
        hit = self.index_parts.get(key)
        if hit is None:
            hit = self.builder.gep(base, [index], inbounds=True)
            if vector is not None:
                hit = self.builder.bitcast(hit, vector.as_pointer())
            self.index_parts[key] = hit
        return hit
