import socket

import pytest


def test_connecting_to_a_public_address_fails() -> None:
    with socket.socket() as sock, pytest.raises(RuntimeError, match="must not reach the network"):
        sock.connect(("93.184.216.34", 443))
