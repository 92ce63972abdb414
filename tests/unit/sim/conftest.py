import pytest

from pyvta.sim import native


@pytest.fixture(params=["numpy", "native"])
def engine(request):
    """The functional simulator's engines: every test taking it runs on both."""
    if request.param == "native" and not native.available():
        pytest.skip("the native engine needs llvmlite (not installed here)")
    return request.param
