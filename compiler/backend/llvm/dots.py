"""The x86 integer dot products of the CPU code generator: te's ``dot_i16x2``, ``dot_u8s8x4``,
``dot_u7s8x4`` and ``dot_u7s8x4_sum`` as ``pmaddwd``, ``vpdpbusd`` or ``pmaddubsw`` where the target has them,
else as explicit part-wise multiplies and adds.

A mixin of :class:`~pyvta.compiler.backend.llvm.codegen.CodeGen`: it uses the generator's
builder (``b``), ``expr``, ``_pair``, ``_is_vec``, ``_decl`` and ``target``.
"""

from __future__ import annotations

from llvmlite import ir

from pyvta.compiler.backend.llvm.frame import I32
from pyvta.compiler.ir.expr import Call


class IntDots:
    # pmaddwd by int32 lanes: (intrinsic, the target feature it needs)
    _PMADDWD = {4: ("llvm.x86.sse2.pmadd.wd", "sse2"), 8: ("llvm.x86.avx2.pmadd.wd", "avx2"),
                16: ("llvm.x86.avx512.pmaddw.d.512", "avx512bw")}  # fmt: skip

    def _dot_i16x2(self, e: Call):
        """te ``dot_i16x2(p, q)``: each int32 lane two int16, ``lo*lo + hi*hi``; a vector
        whose width has a ``pmaddwd`` on this target is one call of it, the rest half-wise
        multiplies and adds (:meth:`_dot_parts`)."""
        p, q = self._pair(self.expr(e.args[0]), self.expr(e.args[1]))
        n = p.type.count if self._is_vec(p) else None
        name, feature = self._PMADDWD.get(n, (None, None))
        if name is not None and self._has(feature):
            halves = ir.VectorType(ir.IntType(16), 2 * n)
            fn = self._decl(name, p.type, [halves, halves])
            return self.b.call(fn, [self.b.bitcast(p, halves), self.b.bitcast(q, halves)])
        return self._dot_parts(p, q, 16, signed_p=True)

    # vpdpbusd by int32 lanes: the intrinsic (AVX-512 VNNI on 512 bits; on 128 and 256 bits
    # AVX-VNNI, or AVX-512 VNNI with AVX-512VL)
    _VPDPBUSD = {4: "llvm.x86.avx512.vpdpbusd.128", 8: "llvm.x86.avx512.vpdpbusd.256",
                 16: "llvm.x86.avx512.vpdpbusd.512"}  # fmt: skip

    def _has(self, *features) -> bool:
        have = self.target.features.split(",")
        return all(f"+{f}" in have for f in features)

    def _has_vpdpbusd(self, lanes: int | None) -> bool:
        if lanes not in self._VPDPBUSD:
            return False
        if lanes == 16:
            return self._has("avx512vnni")
        return self._has("avxvnni") or self._has("avx512vnni", "avx512vl")

    def _dot_u8s8x4(self, e: Call, acc=None):
        """``acc + `` te ``dot_u8s8x4(p, q)``: four u8 x s8 byte products per int32 lane,
        summed; a vector with a ``vpdpbusd`` on this target is one call of it (accumulating
        into ``acc``), the rest byte-wise multiplies and adds (:meth:`_dot_parts`)."""
        p, q = self._pair(self.expr(e.args[0]), self.expr(e.args[1]))
        if acc is not None:
            p, acc = self._pair(p, acc)
            q, acc = self._pair(q, acc)
        n = p.type.count if self._is_vec(p) else None
        if self._has_vpdpbusd(n):
            fn = self._decl(self._VPDPBUSD[n], p.type, [p.type] * 3)
            return self.b.call(fn, [ir.Constant(p.type, None) if acc is None else acc, p, q])
        total = self._dot_parts(p, q, 8, signed_p=False)
        return total if acc is None else self.b.add(acc, total)

    # pmaddubsw by int32 lanes: (intrinsic, the target feature it needs)
    _PMADDUBSW = {4: ("llvm.x86.ssse3.pmadd.ub.sw.128", "ssse3"),
                  8: ("llvm.x86.avx2.pmadd.ub.sw", "avx2"),
                  16: ("llvm.x86.avx512.pmaddubs.w.512", "avx512bw")}  # fmt: skip

    def _dot_u7s8x4(self, e: Call):
        """te ``dot_u7s8x4(p, q)`` (``p``'s bytes 0..127): ``vpdpbusd`` where the target has
        it, else on a vector with a ``pmaddubsw`` that (byte pairs to int16, exact for such
        ``p``) and a ``pmaddwd`` by ones (int16 pairs to int32), else as ``dot_u8s8x4``."""
        p, q = self._pair(self.expr(e.args[0]), self.expr(e.args[1]))
        pairs = self._pmaddubsw(p, q)
        if pairs is None:
            return self._dot_u8s8x4(e)
        return self._pairs_to_i32(pairs, p.type)

    def _dot_u7s8x4_sum(self, e: Call):
        """te ``dot_u7s8x4_sum(p0, q0, p1, q1, ...)`` (int16 sums proven in range by the
        caller): on a vector with a ``pmaddubsw`` (and no ``vpdpbusd``) one per pair, their
        int16 sum and one ``pmaddwd`` by ones, else the pairs' ``dot_u7s8x4`` added."""
        vals = [self.expr(a) for a in e.args]
        n = next((v.type.count for v in vals if self._is_vec(v)), None)
        vals = [self._bcast(v, n) for v in vals] if n is not None else vals
        pairs = [self._pmaddubsw(vals[k], vals[k + 1]) for k in range(0, len(vals), 2)]
        if any(p is None for p in pairs):
            terms = [
                self._dot_u7s8x4(Call("dot_u7s8x4", e.args[k : k + 2], "int32"))
                for k in range(0, len(e.args), 2)
            ]
        else:
            total = pairs[0]
            for p in pairs[1:]:
                total = self.b.add(total, p)
            return self._pairs_to_i32(total, vals[0].type)
        total = terms[0]
        for t in terms[1:]:
            total = self.b.add(total, t)
        return total

    def _pmaddubsw(self, p, q):
        """``pmaddubsw`` of the int32 vectors ``p`` (u8 bytes) and ``q`` (s8 bytes): their byte
        pairs' products summed to int16 lanes (saturating), or None where the target has
        ``vpdpbusd`` for such vectors or no ``pmaddubsw``."""
        n = p.type.count if self._is_vec(p) else None
        name, feature = self._PMADDUBSW.get(n, (None, None))
        if self._has_vpdpbusd(n) or name is None or not self._has(feature):
            return None
        quads, halves = ir.VectorType(ir.IntType(8), 4 * n), ir.VectorType(ir.IntType(16), 2 * n)
        return self.b.call(
            self._decl(name, halves, [quads, quads]),
            [self.b.bitcast(p, quads), self.b.bitcast(q, quads)],
        )

    def _pairs_to_i32(self, pairs, lanes_type):
        """int16 lanes -> the int32 sums of their pairs: one ``pmaddwd`` by ones."""
        n = lanes_type.count
        wd, _ = self._PMADDWD[n]
        ones = ir.Constant(pairs.type, [1] * (2 * n))
        return self.b.call(self._decl(wd, lanes_type, [pairs.type, pairs.type]), [pairs, ones])

    def _dot_parts(self, p, q, part_bits: int, signed_p: bool):
        """Each int32 lane of ``p`` and ``q`` (scalars or vectors of ``n`` lanes) as ``32 /
        part_bits`` little-endian parts, multiplied part by part and summed per lane:
        ``p``'s parts signed (``signed_p``) or unsigned, ``q``'s signed. The parts are a
        bitcast to ``<parts * n x iN>`` widened to int32, so the lane layout is explicit in the
        IR (LLVM 22's SLP vectorizer miscompiled the shift-and-mask form of the u8 x s8 dot
        inside parallel bodies on AVX-512 hosts: wrong int8 convolutions)."""
        n = p.type.count if self._is_vec(p) else 1
        parts = 32 // part_bits
        narrow = ir.VectorType(ir.IntType(part_bits), parts * n)
        wide = ir.VectorType(I32, parts * n)
        pw = (self.b.sext if signed_p else self.b.zext)(self.b.bitcast(p, narrow), wide)
        prod = self.b.mul(pw, self.b.sext(self.b.bitcast(q, narrow), wide))
        total = None
        for j in range(parts):  # part j of every lane: elements j, j + parts, ...
            idx = ir.Constant(ir.VectorType(I32, n), [parts * k + j for k in range(n)])
            term = self.b.shuffle_vector(prod, ir.Constant(wide, ir.Undefined), idx)
            total = term if total is None else self.b.add(total, term)
        if not self._is_vec(p):
            return self.b.extract_element(total, ir.Constant(I32, 0))
        return total
