"""Devices over the network: the protocol, the server (``pyvta serve``) and its bitstream store.
The client is ``driver/ops_tcp.py`` (``driver.open("tcp://HOST:PORT", key_file=...)``)."""
