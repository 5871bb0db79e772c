"""Test-wide guards: no real network model calls, no provider credentials."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

_real_connect = socket.socket.connect


def _is_loopback(address: Any) -> bool:
    if isinstance(address, str):  # a Unix socket path
        return True
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_loopback(address):
        raise RuntimeError(f"Tests must not reach the network (tried to connect to {address!r})")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTENSEMBLE_MODEL"):
        monkeypatch.delenv(name, raising=False)
