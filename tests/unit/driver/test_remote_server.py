"""The device server (driver.remote) and its client (ops_tcp.RemoteDevice), on 127.0.0.1 backed by
the simulator: a kernel through tcp equals the local device bit for bit, constants travel once,
and every misbehaving client is refused clearly while the server goes on serving the next one."""

import hashlib
import json
import shutil
import socket
import struct
import threading
import time

import numpy as np
import pytest

from pyvta import driver
from pyvta.compiler.backend.vta.operator import build_kernel
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.driver import DeviceError, SimDevice
from pyvta.driver.kernel import RegionKind, load_kernel
from pyvta.driver.ops_pynq import BitstreamError
from pyvta.driver.remote import protocol as p
from pyvta.driver.remote.bitstreams import BitstreamStore
from pyvta.driver.remote.server import DeviceServer, Limits, ServerThread
from pyvta.driver.remote.session import OpRefused, Session
from pyvta.isa import HwConfig
from pyvta.testing.remote import (
    KEY,
    ask,
    auth_frame,
    closed,
    raw_connect,
    raw_session,
    self_signed_cert,
)

SEED = 11
FAST = Limits(request_timeout_s=0.5, queue_timeout_s=0.3, max_frame_bytes=1 << 20)


@pytest.fixture
def server():
    with ServerThread(SimDevice(HwConfig()), KEY, limits=FAST) as s:
        yield s


def _open(server, **kw):
    return driver.open(f"tcp://{server.address}", key=KEY, **kw)


def _kernel(seed: int = SEED):
    """A small conv2d layer with seeded random weights and bias (a relocatable kernel)."""
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    wl = ConvWorkload(8, 8, 32, 32, 3, 3, 1, 1)
    w = rng.integers(-8, 8, (2, 2, 3, 3, 16, 16), dtype=np.int8)
    b = rng.integers(-500, 500, (2, 16), dtype=np.int32)
    kernel = build_kernel(wl, Epilogue(bias=True, shift=6), w, b, HwConfig())
    x = {
        r.name: rng.integers(-64, 64, r.nbytes, dtype=np.int8).view(np.uint8)
        for r in kernel.regions_of(RegionKind.INPUT)
    }
    return kernel, x


def _assert_serves(server):
    """A good client still gets the device and a correct answer."""
    with _open(server) as dev:
        a = dev.alloc(64)
        dev.write(a, np.arange(64, dtype=np.uint8))
        assert np.array_equal(dev.read(a, 64), np.arange(64, dtype=np.uint8))


def test_kernel_through_tcp_equals_local_bit_for_bit(server):
    kernel, x = _kernel()
    local = load_kernel(SimDevice(HwConfig()), kernel)
    want, want_res = local.run(x)
    with _open(server, config=HwConfig()) as dev:
        got, res = load_kernel(dev, kernel).run(x)
        again, _ = load_kernel(dev, kernel).run(x)  # constants by hash now
        stats = dev.session_stats()
        load_kernel(dev, kernel).run(x, recurring=True)  # inputs by hash from now on
        before = dev.session_stats()["bytes_in"]
        third, _ = load_kernel(dev, kernel).run(x, recurring=True)
        sent = dev.session_stats()["bytes_in"] - before
    assert np.array_equal(third["output"], want["output"])
    assert sent == kernel.region("insns").nbytes  # only the relocated instruction stream
    assert set(got) == {"output"} and want["output"].any()
    assert all(np.array_equal(got[k], want[k]) and np.array_equal(again[k], want[k]) for k in want)
    assert res.stats == want_res.stats and res.cycles > 0
    n_consts = len(kernel.regions_of(RegionKind.CONST)) - 1  # all but the instruction stream
    assert stats["ops"]["write_cached"] == n_consts, stats
    assert stats["cached_consts"] == n_consts and stats["errors"] == {}


def test_kernel_through_tcp_on_the_rtl_equals_the_simulator():
    if "rtl" not in driver.device_kinds():
        pytest.skip("needs the RTL device (driver/ops_rtl.py, Verilator)")
    kernel, x = _kernel()
    want, _ = load_kernel(SimDevice(HwConfig()), kernel).run(x)
    try:
        rtl = driver.open("rtl", config=HwConfig())
    except DeviceError as e:
        pytest.skip(f"the RTL device cannot be opened here: {e}")
    with ServerThread(rtl, KEY) as s, _open(s) as dev:
        got, res = load_kernel(dev, kernel).run(x)
    assert np.array_equal(got["output"], want["output"])
    assert res.stats is None or res.stats.cycles > 0


def test_config_mismatch_and_missing_key_are_refused(server):
    other = HwConfig(LOG_INP_BUFF_SIZE=14)
    with pytest.raises(DeviceError, match=f"serves HwConfig {HwConfig().tag}; this needs"):
        _open(server, config=other)
    with pytest.raises(DeviceError, match="requires a key"):
        driver.open(f"tcp://{server.address}")
    _assert_serves(server)


def test_no_key_wrong_key_and_replayed_answer_are_refused(server):
    sock, _ = raw_connect(server.address)  # no authentication: straight to an operation
    reply, _ = ask(sock, {"op": "info"})
    assert (reply["ok"], reply["error"], reply["msg"]) == (
        False,
        "auth",
        "authenticate first: op 'auth'",
    )
    assert closed(sock)
    with pytest.raises(DeviceError, match="authentication failed"):
        driver.open(f"tcp://{server.address}", key=b"not-the-key-0123456789")
    sock, hello = raw_connect(server.address)  # a good answer, recorded ...
    answer = auth_frame(KEY, hello)
    sock.sendall(answer)
    assert p.recv_frame(sock)[0]["ok"]
    sock.close()
    sock, _ = raw_connect(server.address)  # ... replayed on a new connection (a new nonce)
    sock.sendall(answer)
    assert p.recv_frame(sock)[0]["error"] == "auth" and closed(sock)
    _assert_serves(server)


def test_frame_errors_end_the_connection(server):
    sock = raw_session(server.address)
    sock.sendall(struct.pack(">II", 2 << 20, 10))  # over the 1 MiB limit
    reply, _ = p.recv_frame(sock)
    assert reply["error"] == "frame" and "exceeds the maximum (1048576)" in reply["msg"]
    assert closed(sock)
    sock = raw_session(server.address)
    sock.sendall(struct.pack(">II", 20, 100))  # header longer than the frame
    assert p.recv_frame(sock)[0]["error"] == "frame" and closed(sock)
    _assert_serves(server)


def test_message_errors_are_answered_and_the_session_goes_on(server):
    sock = raw_session(server.address)
    bad = b"{not json"
    sock.sendall(struct.pack(">II", 4 + len(bad), len(bad)) + bad)
    reply, _ = p.recv_frame(sock)
    assert reply["error"] == "bad_request" and "not UTF-8 JSON" in reply["msg"]
    reply, _ = ask(sock, {"op": "exec", "code": "import os"})
    assert reply["error"] == "bad_request" and "unknown operation 'exec'" in reply["msg"]
    assert "alloc" in reply["msg"]  # names the operations there are
    reply, _ = ask(sock, {"op": "alloc", "nbytes": "big", "align_bytes": 64})
    assert "field 'nbytes' must be a int" in reply["msg"]
    reply, _ = ask(sock, {"op": "read", "addr": 0, "nbytes": 64})  # no allocation yet
    assert reply["error"] == "outside_allocation" and "outside every allocation" in reply["msg"]
    reply, _ = ask(sock, {"op": "alloc", "nbytes": 64, "align_bytes": 64})
    addr = reply["addr"]
    reply, _ = ask(sock, {"op": "read", "addr": addr + 32, "nbytes": 64})  # runs past its end
    assert reply["error"] == "outside_allocation"
    reply, _ = ask(sock, {"op": "write", "addr": addr}, [bytes(65)])
    assert reply["error"] == "outside_allocation"
    reply, _ = ask(sock, {"op": "launch", "insn_addr": addr + 4096, "insn_count": 1})
    assert reply["error"] == "outside_allocation"
    reply, blobs = ask(sock, {"op": "read", "addr": addr, "nbytes": 64})  # still served
    assert reply["ok"] and blobs == [bytes(64)]
    sock.close()
    with _open(server) as dev, pytest.raises(DeviceError, match="outside every allocation"):
        dev.read(1 << 20, 16)


def test_a_client_stalling_mid_frame_is_cut_off(server):
    sock = raw_session(server.address)
    sock.sendall(struct.pack(">II", 1000, 10) + b'{"op": "in')  # then nothing
    t0 = time.perf_counter()
    reply, _ = p.recv_frame(sock)
    assert reply["error"] == "timeout" and closed(sock)
    assert time.perf_counter() - t0 < 5
    _assert_serves(server)


def test_one_owner_at_a_time(server):
    with _open(server):
        t0 = time.perf_counter()
        with pytest.raises(DeviceError, match="busy: the device is in use by another client"):
            _open(server)
        assert time.perf_counter() - t0 >= 0.25  # it waited its queue timeout first
    _assert_serves(server)


def test_the_next_client_in_the_queue_gets_the_device():
    with ServerThread(SimDevice(HwConfig()), KEY, limits=Limits(queue_timeout_s=10)) as s:
        first = _open(s)
        got = []
        t = threading.Thread(target=lambda: got.append(_open(s)))
        t.start()
        time.sleep(0.3)
        assert not got  # waiting
        first.close()
        t.join(10)
        assert got and got[0].alloc(64) > 0
        got[0].close()


def test_a_client_gone_mid_launch_leaves_the_device_usable(server):
    kernel, x = _kernel()
    with _open(server) as dev:
        loaded = load_kernel(dev, kernel)
        for name, data in x.items():
            dev.write(loaded.addrs[name], data)
        sock = dev._sock  # launch, then vanish without reading the answer
        sock.sendall(
            p.encode_frame(
                {
                    "op": "launch",
                    "insn_addr": loaded.addrs["insns"],
                    "insn_count": kernel.insn_count,
                }
            )
        )
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        dev._sock = None
    want, _ = load_kernel(SimDevice(HwConfig()), kernel).run(x)
    with _open(server) as dev:  # waits for that launch, then a fresh session
        got, _ = load_kernel(dev, kernel).run(x)
    assert np.array_equal(got["output"], want["output"])


def test_refuses_to_listen_beyond_loopback_without_a_key():
    with pytest.raises(p.ProtocolError, match="refusing to listen on 0.0.0.0 without a key"):
        DeviceServer(SimDevice(HwConfig()), None, host="0.0.0.0")
    with ServerThread(SimDevice(HwConfig()), None) as s, driver.open(f"tcp://{s.address}") as dev:
        assert dev.alloc(16) > 0  # loopback without a key: allowed


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls(tmp_path):
    import ssl

    cert, key = self_signed_cert(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    with ServerThread(SimDevice(HwConfig()), KEY, ssl_context=ctx) as s:
        with driver.open(f"tcp://{s.address}", key=KEY, tls_ca=str(cert)) as dev:
            a = dev.alloc(32)
            dev.write(a, bytes(range(32)))
            assert dev.read(a, 32).tobytes() == bytes(range(32))
        with pytest.raises(DeviceError):  # plain text to a TLS server
            driver.open(f"tcp://{s.address}", key=KEY, timeout_s=2)


def _upload(tag: str = HwConfig().tag, tamper: bool = False) -> dict[str, bytes]:
    """A bitstream folder as ``pyvta board recipe --build`` writes it (name -> bytes)."""
    files = {"vta.bit": b"\x00\x01bitstream", "vta.hwh": b"<hwh/>"}
    manifest = {
        "config_tag": tag,
        "files": {"bit": "vta.bit", "hwh": "vta.hwh"},
        "build": {
            f"{k}_sha256": hashlib.sha256(files[f"vta.{k}"]).hexdigest() for k in ("bit", "hwh")
        },
    }
    if tamper:
        files["vta.bit"] += b"!"
    files["manifest.json"] = json.dumps(manifest).encode()
    return files


def test_bitstream_store_checks_and_keeps_by_sha256(tmp_path):
    store = BitstreamStore(tmp_path / "store")
    digest, folder, manifest = store.put(_upload())
    assert folder == tmp_path / "store" / digest and manifest["config_tag"] == HwConfig().tag
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "vta.bit", "vta.hwh"]
    assert store.put(_upload())[0] == digest  # idempotent
    with pytest.raises(BitstreamError, match="sha256 does not match"):
        store.put(_upload(tamper=True))
    bad = _upload()
    bad["../evil.bit"] = bad.pop("vta.bit")
    with pytest.raises(BitstreamError, match="file name '../evil.bit' refused"):
        store.put(bad)
    with pytest.raises(BitstreamError, match="names .* the upload has"):
        store.put({k: v for k, v in _upload().items() if k != "vta.hwh"})
    unhashed = _upload()
    unhashed["manifest.json"] = unhashed["manifest.json"].replace(b"bit_sha256", b"x")
    with pytest.raises(BitstreamError, match="not a built bitstream manifest"):
        store.put(unhashed)
    assert [p.name for p in (tmp_path / "store").iterdir()] == [digest]  # nothing else kept


class _Board(SimDevice):
    """A simulated board with a programming hook (as the PYNQ device has)."""

    def __init__(self, tag):
        super().__init__(HwConfig())
        self.tag, self.programmed = tag, []

    def program_bitstream(self, path):
        self.programmed.append(path)
        return self.tag


def test_bitstream_upload_programs_through_the_device_hook(tmp_path, server):
    store = BitstreamStore(tmp_path)
    good = Session(1, "t", _Board(HwConfig().tag), 1 << 20, store)
    files = _upload()
    reply, _ = good.execute(
        "upload_bitstream", {"names": sorted(files)}, [files[n] for n in sorted(files)]
    )
    assert reply["config_tag"] == HwConfig().tag and good.device.programmed
    liar = Session(2, "t", _Board("other"), 1 << 20, store)
    with pytest.raises(OpRefused, match="the ID register reads 'other'"):
        liar.execute(
            "upload_bitstream", {"names": sorted(files)}, [files[n] for n in sorted(files)]
        )
    sim = Session(3, "t", SimDevice(HwConfig()), 1 << 20, store)
    with pytest.raises(OpRefused, match="an upload needs a manifest.json"):
        sim.execute("upload_bitstream", {"names": ["a.bit"]}, [b"x"])
    with pytest.raises(OpRefused, match="SimDevice cannot be programmed"):
        sim.execute("upload_bitstream", {"names": sorted(files)}, [files[n] for n in sorted(files)])
    with _open(server) as dev, pytest.raises(DeviceError, match="bitstream upload is off"):
        dev.upload_bitstream(files)  # the server started without --allow-bitstream-upload


def test_large_writes_and_reads_go_in_chunks(server, monkeypatch):
    from pyvta.driver import ops_tcp

    monkeypatch.setattr(ops_tcp, "CHUNK_BYTES", 1000)
    data = np.random.default_rng(SEED).integers(0, 256, 4500, dtype=np.uint8)
    with _open(server) as dev:
        a = dev.alloc(len(data))
        dev.write(a, data)
        assert np.array_equal(dev.read(a, len(data)), data)
        assert dev.session_stats()["ops"] == {"alloc": 1, "write": 5, "read": 5, "stats": 1}


def test_a_launch_fault_through_tcp_is_the_local_devices_error_at_the_same_instruction(server):
    """The served device's fault (kind and index) crosses the connection: the client raises the
    same DeviceFault subclass, so also the simulator's error class, naming the same instruction."""
    from pyvta.driver.launch import DeviceFault, fault_kind
    from pyvta.isa import INSN_BYTES
    from pyvta.sim.errors import instruction_index
    from pyvta.sim.faults import faulting_programs

    def error_of(dev, raw):
        with pytest.raises(Exception) as caught:
            dev.run(raw)
        return caught.value

    checked = 0
    with _open(server) as dev:
        for name, prog in faulting_programs(HwConfig()).items():
            raw = bytes(prog.dram[prog.insn_addr : prog.insn_addr + prog.insn_count * INSN_BYTES])
            local = error_of(SimDevice(HwConfig()), raw)
            dev.reset()  # both devices fresh: the stream alone reads the same (zero) micro-ops
            remote = error_of(dev, raw)
            if fault_kind(local) is None:  # the stream alone (no data) fails otherwise
                assert not isinstance(remote, DeviceFault), name
                continue
            assert isinstance(remote, DeviceFault) and isinstance(remote, type(local)), name
            assert instruction_index(remote) == instruction_index(local) is not None, name
            checked += 1
    _assert_serves(server)
    assert checked >= 5  # each fault kind the stream alone can show
