"""Reference workloads: the ResNet-18 conv2d layers C1-C12 of the TVM and AutoTVM papers
(batch 1, "same" padding; ../shared/reference/anchors.md)."""

from __future__ import annotations

from typing import NamedTuple


class Conv2dShape(NamedTuple):
    height: int
    width: int
    in_channels: int
    out_channels: int
    kernel: int
    stride: int

    @property
    def pad(self) -> int:
        return self.kernel // 2


RESNET18_LAYERS: dict[str, Conv2dShape] = {
    "C1": Conv2dShape(224, 224, 3, 64, 7, 2),
    "C2": Conv2dShape(56, 56, 64, 64, 3, 1),
    "C3": Conv2dShape(56, 56, 64, 64, 1, 1),
    "C4": Conv2dShape(56, 56, 64, 128, 3, 2),
    "C5": Conv2dShape(56, 56, 64, 128, 1, 2),
    "C6": Conv2dShape(28, 28, 128, 128, 3, 1),
    "C7": Conv2dShape(28, 28, 128, 256, 3, 2),
    "C8": Conv2dShape(28, 28, 128, 256, 1, 2),
    "C9": Conv2dShape(14, 14, 256, 256, 3, 1),
    "C10": Conv2dShape(14, 14, 256, 512, 3, 2),
    "C11": Conv2dShape(14, 14, 256, 512, 1, 2),
    "C12": Conv2dShape(7, 7, 512, 512, 3, 1),
}
# C1 has 3 input channels and stays on the CPU for VTA.
VTA_LAYERS = [name for name in RESNET18_LAYERS if name != "C1"]
