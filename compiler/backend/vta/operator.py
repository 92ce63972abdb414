"""A compiled VTA conv2d/dense: lowered once into a relocatable kernel (``build_kernel``, at
compile time), placed on a device (``driver.kernel.load_kernel``), then run on packed int8 tensors
(``runtime.accelerator.LoadedLayer``)."""

from __future__ import annotations

import dataclasses
import io
import zipfile

import numpy as np

from pyvta.compiler.backend.vta.config import ConvConfig, FitError, check_fit, overlapped
from pyvta.compiler.backend.vta.constants import bias_digit_blocks, identity_block, ones_row
from pyvta.compiler.backend.vta.conv2d import DramMap, lower_conv2d
from pyvta.compiler.backend.vta.default import default_config
from pyvta.compiler.backend.vta.packing import check_int32
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue, WorkloadError
from pyvta.driver.kernel import (
    Kernel,
    RegionKind,
    layout_regions,
    load_kernel,
    relocation_table,
)
from pyvta.isa import HwConfig, encode_insns, encode_uops
from pyvta.runtime.accelerator import LoadedLayer


def lowering_epilogue(
    wl: ConvWorkload, ep: Epilogue, bias: np.ndarray | None
) -> tuple[Epilogue, np.ndarray | None]:
    """``ep`` with the lowering choices these bias values allow, and the bias digit blocks.

    The bias is added by one GEMM pass over "bias digit" weights when its values are small
    enough; with a residual, the shift is split around the residual add when the int32 sum
    cannot wrap. (A tuner measuring a network layer uses this same epilogue.) With a channel
    shift the bias is added on the ALU (its rows sit beside the shift rows), and a residual is
    refused where the int32 sum could wrap (the channel shift comes before the residual add)."""
    gemm_bias = ep.bias and bias is not None and not ep.channel_shift
    digits = bias_digit_blocks(bias) if gemm_bias else None
    ep = dataclasses.replace(ep, bias_via_gemm=digits is not None)
    if ep.residual and ep.channel_shift:
        terms = wl.red_blocks * wl.block * wl.kernel_h * wl.kernel_w
        top = terms * 128 * 128 + (int(np.abs(bias).max()) if ep.bias else 0)
        if top + (128 << ep.residual_shift) >= 2**31:
            raise WorkloadError(
                f"{wl}: a per-channel shift before the residual add is exact only when the int32"
                f" sum cannot wrap; |acc| may reach {top} and the residual 128 <<"
                f" {ep.residual_shift} (allowed: below 2**31)"
            )
    elif ep.residual:
        # (acc + r << k) >> s == ((acc >> a) + (r << (k - a))) >> (s - a) when nothing wraps
        terms = wl.red_blocks * wl.block * wl.kernel_h * wl.kernel_w
        top = terms * 128 * 128 + (int(np.abs(bias).max()) if ep.bias else 0)
        if top + (128 << ep.residual_shift) < 2**31:
            ep = dataclasses.replace(ep, residual_after_shift=True)
    return ep, digits


def alu_bias_is_free(wl: ConvWorkload, ep: Epilogue, config: ConvConfig, hw: HwConfig) -> bool:
    """Whether the bias is better added on the ALU than by a GEMM pass: with the epilogue
    overlapped (``config.overlapped``, the ALU bias rows fitting too) the ALU pass (one cycle a
    row, rule 8 of ``isa.layout.OVERLAP_DOC``) runs beside the other thread's GEMMs, while the
    GEMM pass holds the GEMM pipe."""
    alu = dataclasses.replace(ep, bias_via_gemm=False)
    try:
        check_fit(wl, alu, config, hw)
    except FitError:
        return False
    return overlapped(wl, alu, config, hw) > 0


def config_epilogue(wl: ConvWorkload, ep: Epilogue, config: ConvConfig, hw: HwConfig) -> Epilogue:
    """The layer's lowering epilogue ``ep`` as lowered with ``config``: the bias by a GEMM pass
    over digit rows only where they fit beside the config's tiles and the ALU pass is not free
    beside the other thread's GEMMs (``alu_bias_is_free``); else by the ALU. One home for the
    choice: ``build_kernel`` and the tuner's ``measurement_kernel`` both take it."""
    if not ep.bias_via_gemm:
        return ep
    alu = dataclasses.replace(ep, bias_via_gemm=False)
    try:
        check_fit(wl, ep, config, hw)
    except FitError:  # the digit rows do not fit beside this config's tiles
        return alu
    return alu if alu_bias_is_free(wl, ep, config, hw) else ep


def _check_operands(wl: ConvWorkload, ep: Epilogue, weights, bias, channel_shifts) -> None:
    expect = (wl.co_blocks, wl.red_blocks, wl.kernel_h, wl.kernel_w, wl.block, wl.block)
    if weights.shape != expect or weights.dtype != np.int8:
        raise ValueError(f"weights must be int8 {expect}, got {weights.dtype} {weights.shape}")
    if ep.bias and (bias is None or bias.shape != (wl.co_blocks, wl.block)):
        raise ValueError(f"bias must be int32 {(wl.co_blocks, wl.block)} for an epilogue with bias")
    if ep.channel_shift != (channel_shifts is not None):
        raise ValueError("channel_shifts are given exactly when the epilogue has channel_shift")
    if channel_shifts is not None and (
        channel_shifts.shape != (wl.co_blocks, wl.block)
        or not ((channel_shifts >= 0) & (channel_shifts <= 31)).all()
    ):
        raise ValueError(
            f"channel_shifts must be int32 {(wl.co_blocks, wl.block)} in 0..31, got"
            f" {channel_shifts.dtype} {channel_shifts.shape}"
        )


def build_kernel(
    wl: ConvWorkload,
    ep: Epilogue,
    weights: np.ndarray,
    bias: np.ndarray | None,
    hw: HwConfig,
    config: ConvConfig | None = None,
    measure=None,
    search: int = 0,
    explore: int = 0,
    channel_shifts: np.ndarray | None = None,
) -> Kernel:
    """conv2d (+ fused epilogue) lowered at base 0 into a relocatable ``driver.Kernel``.

    ``weights`` packed (co_b, ci_b, KH, KW, b, b) int8; ``bias`` packed (co_b, b) int32;
    ``channel_shifts`` (with ``ep.channel_shift``) packed (co_b, b) int32, after the bias rows
    in the ``bias`` region.
    Without ``config`` a default is derived for the shape; with ``search`` > 0 it is the fastest
    of that many candidates on ``measure(insns) -> cycles`` (e.g. the cycle model). Regions:
    ``input`` (ci_b, H, W, b) int8, ``residual`` and ``output`` (co_b, OH, OW, b) int8, and the
    constants ``weights``, ``bias``, ``consts`` (bias digits, scaled identity), ``ones``, ``uops``,
    ``insns``.
    """
    if ep.bias and bias is not None:
        bias = check_int32("bias", bias)  # before any use: a float or wide bias is refused
    layer_ep, digits = lowering_epilogue(wl, ep, bias)
    config = config or default_config(
        wl, layer_ep, hw, measure=measure if search else None, candidates=max(search, 1),
        explore=explore,
    )  # fmt: skip
    ep = config_epilogue(wl, layer_ep, config, hw)
    if not ep.bias_via_gemm:
        digits = None
    _check_operands(wl, ep, weights, bias, channel_shifts)
    shift_rows = b"" if channel_shifts is None else np.ascontiguousarray(channel_shifts, "<i4")
    consts = {
        "weights": np.ascontiguousarray(weights, np.int8).tobytes(),
        "bias": (np.ascontiguousarray(bias, "<i4").tobytes() if ep.bias else b"")
        + bytes(shift_rows),
        "consts": np.concatenate(
            [
                digits
                if digits is not None
                else np.zeros((wl.co_blocks, wl.block, wl.block), np.int8),
                identity_block(wl.block, max(ep.residual_gemm_shift, 0)),
            ]
        ).tobytes(),
        "ones": ones_row(wl.block).tobytes(),
    }
    return _lowered_kernel(wl, ep, config, hw, consts, layer_ep, keep=True)


def measurement_kernel(wl: ConvWorkload, ep: Epilogue, config: ConvConfig, hw: HwConfig) -> Kernel:
    """The kernel of one schedule candidate, to measure its cycles: ``ep`` is the layer's
    lowering epilogue (as a tuning task gives it), lowered with ``config`` as ``build_kernel``
    lowers it (``config_epilogue``); the constants are zeros."""
    layer_ep, ep = ep, config_epilogue(wl, ep, config, hw)
    w_bytes = wl.co_blocks * wl.red_blocks * wl.kernel_h * wl.kernel_w * wl.block * wl.block
    consts = {
        "weights": bytes(w_bytes),
        "bias": bytes(wl.co_blocks * wl.block * 4 * (int(ep.bias) + int(ep.channel_shift))),
        "consts": bytes((wl.co_blocks + 1) * wl.block * wl.block),
        "ones": ones_row(wl.block).tobytes(),
    }
    return _lowered_kernel(wl, ep, config, hw, consts, layer_ep)


def _lowered_kernel(
    wl: ConvWorkload,
    ep: Epilogue,
    config: ConvConfig,
    hw: HwConfig,
    consts: dict[str, bytes],
    layer_ep: Epilogue,
    keep: bool = False,
) -> Kernel:
    """Place the regions from byte 0, lower the stream against them, build the relocation table.
    ``keep``: the program from the cache where an earlier process lowered the same one, else
    kept there (:func:`lowered_program`)."""
    out_bytes = wl.batch * wl.co_blocks * wl.out_h * wl.out_w * hw.out_elem_bytes
    in_bytes = wl.batch * wl.ci_blocks * wl.height * wl.width * hw.inp_elem_bytes
    sizes = [
        ("input", RegionKind.INPUT, in_bytes),
        ("output", RegionKind.OUTPUT, out_bytes),
    ]
    if ep.residual:
        sizes.append(("residual", RegionKind.INPUT, out_bytes))
    sizes += [(name, RegionKind.CONST, len(data)) for name, data in consts.items() if data]
    base = {r.name: r.offset for r in program_regions(sizes, b"", b"")}
    dram = DramMap(
        data=base["input"] // hw.inp_elem_bytes,
        weights=base["weights"] // hw.wgt_elem_bytes,
        bias=base.get("bias", 0) // hw.acc_elem_bytes,
        output=base["output"] // hw.out_elem_bytes,
        residual=base.get("residual", 0) // hw.out_elem_bytes,
        uops=base["uops"] // hw.uop_elem_bytes,
        wgt_consts=base["consts"] // hw.wgt_elem_bytes,
        ones=base["ones"] // hw.inp_elem_bytes,
    )

    def lower():
        low = lower_conv2d(wl, ep, config, hw, dram)
        return low.insns, low.uops

    program = lowered_program((wl, ep, config, hw, dram), lower, sizes, hw, keep)
    consts = {k: v for k, v in consts.items() if v}
    consts["uops"], consts["insns"] = program.uops, program.insns
    info = {
        "workload": wl.to_dict(),
        "epilogue": dataclasses.asdict(ep),
        "layer_epilogue": dataclasses.asdict(layer_ep),
        "config": config.to_dict(),
        "uops": program.uop_count,
    }
    regions = program_regions(sizes, program.uops, program.insns)
    return Kernel(hw.tag, regions, consts, program.relocs, program.insn_count, info)


def program_regions(sizes: list, uops: bytes, insns: bytes):
    """The kernel's regions: ``sizes``' then the micro-ops' and the stream's (last, as the
    lowering addresses the micro-ops at the end of the constants before their size is known)."""
    return layout_regions(
        [*sizes, ("uops", RegionKind.CONST, len(uops)), ("insns", RegionKind.CONST, len(insns))]
    )


@dataclasses.dataclass(frozen=True)
class Program:
    """A lowered layer's program: its micro-ops and instructions encoded, the relocation table."""

    uops: bytes
    insns: bytes
    relocs: np.ndarray
    insn_count: int
    uop_count: int


def lowered_program(what: tuple, lower, sizes: list, hw: HwConfig, keep: bool) -> Program:
    """The program ``lower()`` makes (``(insns, uops)``, lowered against the regions ``sizes``
    then the micro-ops and the stream: :func:`program_regions`); with ``keep`` read from (or
    written to) the cache folder ``vta-programs``, keyed by ``what`` (every input of the
    lowering), ``sizes`` and the sources of the compiler, the ISA and the driver (the encodings
    and the relocation)."""
    from pyvta import cache
    from pyvta.compiler.backend.llvm.cache import source_digest

    path = None
    if keep:
        digest = source_digest("compiler", "isa", "driver")
        path = cache.keyed_file("vta-programs", repr((*what, sizes)), digest, ".npz")
        try:
            with np.load(path) as z:
                return Program(
                    z["uops"].tobytes(), z["insns"].tobytes(), z["relocs"].astype(np.int32),
                    int(z["insn_count"]), int(z["uop_count"]),
                )  # fmt: skip
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass  # none yet, or damaged: lowered again
    insns, uop_list = lower()
    uops = encode_uops(uop_list, hw) if uop_list else b""
    encoded = encode_insns(insns, hw)
    relocs = relocation_table(insns, program_regions(sizes, uops, encoded), hw)
    program = Program(uops, encoded, relocs, len(insns), len(uop_list))
    if path is not None:
        buf = io.BytesIO()
        np.savez(
            buf, uops=np.frombuffer(uops, np.uint8), insns=np.frombuffer(encoded, np.uint8),
            relocs=relocs, insn_count=program.insn_count, uop_count=program.uop_count,
        )  # fmt: skip
        cache.write_atomic(path, buf.getvalue())
    return program


def kernel_epilogue(kernel: Kernel, layer: bool = False) -> Epilogue | None:
    """The epilogue a conv2d/dense kernel was lowered with (with its lowering choices, the
    config's included); ``layer``: the layer's lowering epilogue before the config's choice
    (``config_epilogue``), the key of the layer in a network tuning log
    (``graph_backend.accelerator_layers``). None for a pool or a fused conv + pool kernel."""
    info = kernel.info
    if info.get("kind"):
        return None
    return Epilogue(**(info.get("layer_epilogue", info["epilogue"]) if layer else info["epilogue"]))


class VtaConv2d(LoadedLayer):
    """A conv2d kernel built for ``device`` and loaded onto it (``build_kernel`` +
    ``load_kernel``), called as the runtime's ``LoadedLayer`` on packed int8 data.

    ``device`` is any ``driver.Device``; ``search`` measures candidates on its ``estimate_cycles``
    (the simulator's cycle model).
    """

    def __init__(
        self,
        wl: ConvWorkload,
        ep: Epilogue,
        weights: np.ndarray,
        bias: np.ndarray | None,
        device,
        config: ConvConfig | None = None,
        search: int = 0,
        explore: int = 0,
    ):
        measure = getattr(device, "estimate_cycles", None)
        kernel = build_kernel(
            wl, ep, weights, bias, device.config, config, measure, search, explore
        )
        super().__init__(load_kernel(device, kernel))
        self.wl, self.device = wl, device

    @property
    def ep(self) -> Epilogue:
        """The epilogue as lowered (``kernel_epilogue``)."""
        return kernel_epilogue(self.kernel)

    @property
    def layer_ep(self) -> Epilogue:
        """The layer's lowering epilogue, before the config's choice (``kernel_epilogue``)."""
        return kernel_epilogue(self.kernel, layer=True)

    @property
    def config(self) -> ConvConfig:
        return ConvConfig.from_dict(self.kernel.info["config"])
