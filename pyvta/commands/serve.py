"""pyvta serve: serve one device (sim, rtl, a board) to authenticated clients over TCP, for
``pyvta run --device tcp://HOST:PORT`` and ``pyvta tune --device tcp://HOST:PORT``.

Loopback unless ``--listen`` says otherwise; any other address needs ``--key-file``. One client
owns the device at a time; the others wait (``--queue-timeout``) or are told it is busy.
"""

from __future__ import annotations

import argparse

from pyvta.commands.common import CommandError, add_config_argument

HELP = "serve a device (sim, rtl, pynq) over TCP with key authentication and optional TLS"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="sim", help="device to serve: a driver.open name (sim, rtl)")
    add_config_argument(p)
    p.add_argument("--listen", default="127.0.0.1:9190", help="HOST:PORT (default 127.0.0.1:9190)")
    p.add_argument("--key-file", dest="key_file", help="pre-shared key (>= 16 bytes)")
    p.add_argument("--tls-cert", dest="tls_cert", help="TLS certificate (PEM); with --tls-key")
    p.add_argument("--tls-key", dest="tls_key", help="TLS private key (PEM)")
    p.add_argument("--bitstream", metavar="DIR", help="board devices: the bitstream to program")
    p.add_argument(
        "--allow-bitstream-upload",
        action="store_true",
        dest="allow_upload",
        help="accept bitstream folders from authenticated clients (needs --key-file)",
    )
    p.add_argument(
        "--bitstream-store",
        dest="store",
        default=None,
        metavar="DIR",
        help="where uploads are kept by sha256 (default: the cache root's bitstreams folder)",
    )
    p.add_argument("--queue-timeout", type=float, default=30.0, dest="queue_timeout_s")
    p.add_argument("--request-timeout", type=float, default=60.0, dest="request_timeout_s")
    p.add_argument("--max-frame-mb", type=int, default=64, dest="max_frame_mb")


def _listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise CommandError(f"--listen {text!r}: give HOST:PORT (e.g. 127.0.0.1:9190)")
    return host.strip("[]"), int(port)


def _ssl_context(args):
    if not args.tls_cert and not args.tls_key:
        return None
    if not (args.tls_cert and args.tls_key):
        raise CommandError("TLS needs both --tls-cert and --tls-key")
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.tls_cert, args.tls_key)
    return ctx


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from pyvta import cache, driver
    from pyvta.commands.common import config_from
    from pyvta.driver.remote.bitstreams import BitstreamStore
    from pyvta.driver.remote.protocol import read_key_file
    from pyvta.driver.remote.server import DeviceServer, Limits

    host, port = _listen(args.listen)
    if driver.device_class(args.device).remote:
        raise CommandError("serve a local device (sim, rtl, pynq), not another server")
    key = read_key_file(args.key_file) if args.key_file else None
    if args.allow_upload and key is None:
        raise CommandError("--allow-bitstream-upload needs --key-file")
    store = None
    if args.allow_upload:
        store = BitstreamStore(args.store or cache.folder("bitstreams"))
    kwargs = {"bitstream": args.bitstream} if args.bitstream else {}
    try:
        device = driver.open(args.device, config=config_from(args), **kwargs)
    except TypeError as e:  # an option this backend does not take (--bitstream on sim)
        raise CommandError(f"device {args.device!r}: {e}") from None
    limits = Limits(
        max_frame_bytes=args.max_frame_mb << 20,
        queue_timeout_s=args.queue_timeout_s,
        request_timeout_s=args.request_timeout_s,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    server = DeviceServer(device, key, host, port, _ssl_context(args), limits, store)

    async def main():
        await server.start()
        print(f"listening on {host}:{server.port}", flush=True)
        await server.serve_forever()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        device.close()
    return 0
