import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

SEED = 20260530


@pytest.fixture
def rng():
    print(f"numpy seed {SEED}")
    return np.random.default_rng(SEED)


@pytest.fixture
def build():
    """Build for the host CPU with the on-disk cache off (tests stay hermetic)."""
    from pyvta import compiler

    def _build(sch, args, **kw):
        kw.setdefault("cache_dir", None)
        return compiler.build(sch, args, **kw)

    return _build


def conv_ref(x, w, stride, pad, acc=np.float64):
    """numpy NCHW convolution: ``x`` [N, C, H, W], ``w`` [O, C, KH, KW] -> [N, O, OH, OW]."""
    xp = np.pad(x.astype(acc), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxij,ocij->noyx", win, w.astype(acc))


@pytest.fixture
def conv_reference():
    return conv_ref
