"""opsel.send_file / opsel.recv_file: one transfer between two threads over
loopback (a listening socket for the receiver, a connected one for the
sender), checked byte for byte and against the digests of the file."""

import hashlib
import pathlib
import socket
import sys
import threading
import time

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


# The shared model of the OPS send tests: a silent probe of 3 samples, so the decision
# comes before any byte moves however fast loopback is (tests/fixtures/README.md).
SILENT = str(pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "ops_send_silent.model.json")
OPS = {"model": SILENT, "pattern": "S3", "steady_s": 0, "lead_in": False, "policy": "*=reno"}


def test_an_ops_send_decides_switches_and_moves_the_file(tmp_path):
    payload = bytes((i * 2654435761 >> 9) & 0xFF for i in range(2_000_003))
    events = []
    src = tmp_path / "src.bin"
    src.write_bytes(payload)
    dst = tmp_path / "dst.bin"
    lst = socket.create_server(("127.0.0.1", 0))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("r", opsel.recv_file(lst, str(dst), {"idle_s": 20})))
    t.start()
    with socket.create_connection(lst.getsockname()) as s:
        sent = opsel.send_file(s, src, {"ops": OPS}, on_event=events.append)
    t.join(30)
    lst.close()
    assert dst.read_bytes() == payload
    assert sent["complete"] and sent["file_identical"] and got["r"]["verified"]
    ops = sent["ops"]
    assert [d["cca"] for d in ops["decisions"]] == ["reno"]
    assert ops["decisions"][0]["samples"] == 3
    assert ops["ccas"] == ["cubic", "reno"]
    assert sent["driver"]["stats"]["decisions"] == 1
    # The events reached on_event: the CCA sets and the selection among them.
    kinds = [e.get("kind") for e in events]
    assert "selected" in kinds and kinds.count("cca_set") == 2, kinds


def test_stop_from_another_thread_keeps_a_verified_prefix(tmp_path):
    block = bytes(range(256)) * 4096  # 1 MiB
    n_blocks = 128
    src = tmp_path / "src.bin"
    with open(src, "wb") as f:
        for _ in range(n_blocks):
            f.write(block)
    dst = tmp_path / "dst.bin"
    part = tmp_path / ".dst.bin.opsel-part"
    lst = socket.create_server(("127.0.0.1", 0))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("r", opsel.recv_file(lst, str(dst), {"idle_s": 20})))
    t.start()
    stop = opsel.Stop()

    def watch():
        # Stop once the receiver holds data (the transfer is then running).
        while not (part.exists() and part.stat().st_size >= 1 << 20):
            time.sleep(0.001)
        stop.set()

    w = threading.Thread(target=watch)
    w.start()
    with socket.create_connection(lst.getsockname()) as s:
        sent = opsel.send_file(s, src, {"cca": "cubic"}, stop=stop)
    w.join(30)
    t.join(30)
    lst.close()
    assert stop.is_set()
    n = sent["driver"]["bytes_sent"]
    assert 1 << 20 <= n < n_blocks << 20
    assert sent["driver"]["end"] == "stopped" and not sent["complete"]
    assert got["r"]["verified"] and not got["r"]["complete"] and not dst.exists()
    kept = part.read_bytes()
    assert len(kept) == n
    assert kept == (block * (n // len(block) + 1))[:n], "the part file is the file's prefix"


def test_bad_ops_specs_and_stop_objects_are_clear_errors(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"x")
    lst = socket.create_server(("127.0.0.1", 0))
    for spec, want in [
        ({"ops": {"steady_s": -1}}, "steady_s"),
        ({"ops": {"model": "no-such-model"}}, "no-such-model"),
        ({"ops": {"patern": "S3"}}, "patern"),
        ({"ops": {}, "cca": "bbr"}, "exclude"),
    ]:
        with socket.create_connection(lst.getsockname()) as s:
            with pytest.raises(ValueError, match=want):
                opsel.send_file(s, src, spec)
    with socket.create_connection(lst.getsockname()) as s:
        with pytest.raises(ValueError, match="opsel.Stop"):
            opsel.send_file(s, src, None, stop=threading.Event())
    lst.close()


def test_an_exception_in_on_event_stops_the_send_and_is_chained(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"y" * 3_000_000)
    dst = tmp_path / "dst.bin"
    lst = socket.create_server(("127.0.0.1", 0))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("r", opsel.recv_file(lst, str(dst), {"idle_s": 20})))
    t.start()

    def boom(event):
        raise KeyError("from on_event")

    with socket.create_connection(lst.getsockname()) as s:
        with pytest.raises(opsel.OpselError, match="on_event") as ei:
            opsel.send_file(s, src, None, on_event=boom)
    assert isinstance(ei.value.__cause__, KeyError)
    t.join(30)
    lst.close()
    # The stopped send was still confirmed: the receiver kept a verified prefix.
    assert got["r"]["verified"] and not got["r"]["complete"]
