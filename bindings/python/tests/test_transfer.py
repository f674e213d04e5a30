"""opsel.send_file / opsel.recv_file: one transfer between two threads over
loopback (a listening socket for the receiver, a connected one for the
sender), checked byte for byte and against the digests of the file."""

import hashlib
import socket
import sys
import threading

import pytest

import opsel

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux only")


def _transfer(tmp_path, payload, send_spec=None, recv_spec=None):
    src = tmp_path / "src.bin"
    src.write_bytes(payload)
    dst = tmp_path / "dst.bin"
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    got = {}

    def receive():
        try:
            got["report"] = opsel.recv_file(lst, str(dst), recv_spec)
        except Exception as e:  # re-raised in the test thread
            got["error"] = e

    t = threading.Thread(target=receive)
    t.start()
    with socket.create_connection(lst.getsockname()) as s:
        sent = opsel.send_file(s, src, send_spec)
        # The caller's socket is still open and theirs.
        assert s.fileno() >= 0
    t.join(30)
    assert not t.is_alive()
    if "error" in got:
        raise got["error"]
    # The listener was handed back blocking and open.
    assert lst.getblocking() and lst.fileno() >= 0
    lst.close()
    return sent, got["report"], dst


@pytest.mark.parametrize("hash_name", ["xxh3", "blake3"])
def test_a_file_crosses_loopback_and_the_reports_agree(tmp_path, hash_name):
    payload = bytes((i * 2654435761 >> 7) & 0xFF for i in range(1_500_007))
    sent, got, dst = _transfer(
        tmp_path, payload, {"hash": hash_name, "cca": "cubic"}, {"idle_s": 10}
    )
    assert dst.read_bytes() == payload
    assert sent["complete"] and sent["file_identical"]
    assert sent["hash"] == got["hash"] == hash_name
    assert sent["driver"]["bytes_sent"] == got["received"] == len(payload)
    assert got["verified"] and got["complete"] and got["file_size"] == len(payload)
    assert sent["digest"] == got["digest"] == got["file_digest"]
    if hash_name == "blake3":
        # BLAKE3 is not in hashlib; its length says which hash it is, and
        # it is not SHA-256 of the file.
        assert len(sent["digest"]) == 64
        assert sent["digest"] != hashlib.sha256(payload).hexdigest()
    else:
        assert len(sent["digest"]) == 32
    assert got["elapsed_s"] > 0


def test_the_default_spec_is_xxh3_and_json_text_works(tmp_path):
    sent, got, dst = _transfer(tmp_path, b"hello" * 1000, None, '{"force": true}')
    assert sent["hash"] == "xxh3" and got["hash"] == "xxh3"
    assert dst.read_bytes() == b"hello" * 1000


def test_a_bad_spec_raises_before_anything_is_sent(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"x")
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    with socket.create_connection(lst.getsockname()) as s:
        with pytest.raises(opsel.InvalidInputError, match="hsah"):
            opsel.send_file(s, src, {"hsah": "xxh3"})
        with pytest.raises(opsel.InvalidInputError, match="md5"):
            opsel.send_file(s, src, {"hash": "md5"})
    with pytest.raises(opsel.OpselError):
        opsel.send_file(12345678, src)
    lst.close()
