"""store/services/gil_handoff.py: the switch interval lowered while dispatch is busy, and put back."""

from __future__ import annotations

import sys
import threading

import pytest

from store import Message, MessageStore
from store.services import gil_handoff
from tests.engine_util import small_config


@pytest.fixture
def interval():
    found = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(found)


def test_nested_holders_lower_it_once_and_the_last_puts_it_back(interval):
    gil_handoff.begin()
    assert sys.getswitchinterval() == pytest.approx(gil_handoff.HANDOFF_INTERVAL_S)
    with gil_handoff.handoff():
        assert sys.getswitchinterval() == pytest.approx(gil_handoff.HANDOFF_INTERVAL_S)
    assert sys.getswitchinterval() == pytest.approx(gil_handoff.HANDOFF_INTERVAL_S)
    gil_handoff.end()
    assert sys.getswitchinterval() == pytest.approx(0.005)
    with pytest.raises(RuntimeError, match="without a begin"):
        gil_handoff.end()


def test_a_lower_interval_of_the_host_is_left_alone(interval):
    sys.setswitchinterval(0.0001)
    with gil_handoff.handoff():
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    assert sys.getswitchinterval() == pytest.approx(0.0001)


def test_put_back_when_the_body_raises(interval):
    with pytest.raises(ValueError):
        with gil_handoff.handoff():
            raise ValueError("x")
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_reput_service_holds_it_while_busy_and_lets_go(interval, tmp_path):
    """While records keep coming the reput thread holds the hand-off; once a pass finds nothing it
    lets go, and a closed store leaves the interval as it found it."""
    lowered = False
    with MessageStore.open(small_config(tmp_path)) as store:
        for n in range(50_000):                  # until seen lowered (a few hundred puts here)
            assert store.put_message(Message("T", b"x" * 200, n % 4)).ok
            if n % 50 == 0 and sys.getswitchinterval() < 0.005:
                lowered = True
                break
        assert lowered and sys.getswitchinterval() == pytest.approx(gil_handoff.HANDOFF_INTERVAL_S)
        for _ in range(500):                     # idle: a pass finds nothing, the hold ends
            if store.dispatch_behind_bytes() == 0 and sys.getswitchinterval() == 0.005:
                break
            threading.Event().wait(0.01)
        assert sys.getswitchinterval() == pytest.approx(0.005)
        assert store.get_message("G", "T", 0, 0, 32).messages
    assert sys.getswitchinterval() == pytest.approx(0.005)
    assert gil_handoff._depth == 0


def test_not_under_sync_flush(interval, tmp_path):
    """SYNC_FLUSH producers wait for each group commit with the GIL released: no hand-off there."""
    with MessageStore.open(small_config(tmp_path, flush_disk_type="SYNC_FLUSH")) as store:
        assert store.services.reput.handoff_gil is False
        for n in range(200):
            assert store.put_message(Message("T", b"x" * 200, n % 4)).ok
            assert sys.getswitchinterval() == pytest.approx(0.005)
    with MessageStore.open(small_config(tmp_path / "async")) as store:
        assert store.services.reput.handoff_gil is True
