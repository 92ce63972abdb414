"""One cache root (``pyvta.cache``): its variables, every writer's folder below it, and
``pyvta cache info|clear``."""

from pathlib import Path

import pytest

from pyvta import cache
from pyvta.cli import main


@pytest.fixture
def no_cache_env(monkeypatch, tmp_path):
    monkeypatch.delenv("PYVTA_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_root_from_pyvta_cache_dir_then_xdg_then_home(no_cache_env, monkeypatch):
    tmp = no_cache_env
    assert cache.root() == tmp / "home" / ".cache" / "pyvta"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp / "xdg"))
    assert cache.root() == tmp / "xdg" / "pyvta"
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp / "one"))
    assert cache.root() == tmp / "one"  # the one root: XDG_CACHE_HOME is only the fallback base
    with pytest.raises(ValueError, match=r"unknown cache folder 'objs' \(allowed: sim, llvm,"):
        cache.folder("objs")


def test_every_writer_keeps_its_cache_under_the_root(no_cache_env, monkeypatch):
    from pyvta.compiler.api import default_cache_dir as llvm_dir
    from pyvta.driver import rtl_build
    from pyvta.hw.runner import default_cache_dir as hw_root
    from pyvta.isa import DEFAULT_CONFIG
    from pyvta.sim import native
    from pyvta.tuner.cpu_measure import CpuBackend

    root = no_cache_env / "one"
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(root))
    assert native.default_cache_dir() == root / "sim"
    assert Path(llvm_dir()) == root / "llvm"
    assert hw_root() == root
    assert rtl_build.model_dir(DEFAULT_CONFIG).parent == root / "hw"
    assert Path(CpuBackend().cache_dir) == root / "tune"


def test_cache_info_and_clear(no_cache_env, monkeypatch, capsys):
    root = no_cache_env / "one"
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(root))
    (root / "sim").mkdir(parents=True)
    (root / "sim" / "k.o").write_bytes(b"x" * 2048)
    (root / "llvm").mkdir()
    (root / "llvm" / "a.ll").write_text("ll")
    (root / "mine").mkdir()  # not pyvta's: clear leaves it
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache root: {root} ($PYVTA_CACHE_DIR)" in out
    assert [ln.split()[:2] for ln in out.splitlines() if ln.split()[0] in ("sim", "total")] == [
        ["sim", "1"],
        ["total", "2"],
    ]
    assert main(["cache", "clear", "sim"]) == 0
    assert not (root / "sim").exists() and (root / "llvm" / "a.ll").exists()
    assert main(["cache", "clear"]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["mine"]
    assert main(["cache", "clear", "objs"]) == 2
    assert "unknown cache folder 'objs' (allowed: sim, llvm," in capsys.readouterr().err


def test_warmup_compiles_the_default_configs_kernels_into_the_root(
    no_cache_env, monkeypatch, capsys
):
    from pyvta.sim import native

    if not native.available():
        pytest.skip("the native engine needs llvmlite (not installed here)")
    root = no_cache_env / "one"
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(root))
    monkeypatch.setattr(native, "_kernels", {})
    assert main(["warmup"]) == 0
    assert "compiled in" in capsys.readouterr().out
    assert len(list((root / "sim").glob("*.o"))) == 1
    monkeypatch.setattr(native, "_kernels", {})  # a new process: the object code is on disk
    assert main(["warmup"]) == 0
    assert "already in the cache, loaded in" in capsys.readouterr().out


def test_atomic_writes_of_one_path_never_share_a_temporary_file(tmp_path):
    """Two writers of one path (two processes of one tuning log, say) each write their own
    temporary file: the path holds one whole version, the other's write is not cut into it,
    and nothing is left beside it. A fixed temporary name (``path + ".tmp"``, as two of the
    tuner's files had) would let the second writer's file be renamed by the first."""
    path = tmp_path / "sub" / "choices.json"
    first, second = b"a" * 100_000, b"b" * 10
    path.parent.mkdir()
    with cache.atomic_output(path) as tmp1, cache.atomic_output(path) as tmp2:
        assert tmp1 != tmp2 and tmp1.parent == tmp2.parent == path.parent
        assert tmp1.suffix == tmp2.suffix == ".json"  # np.savez & co. keep the name given
        tmp1.write_bytes(first)
        tmp2.write_bytes(second)
    assert path.read_bytes() == first  # the outer context renames last
    cache.write_atomic(tmp_path / "new" / "x.bin", second)  # its folder made
    assert (tmp_path / "new" / "x.bin").read_bytes() == second
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["choices.json", "x.bin"]
