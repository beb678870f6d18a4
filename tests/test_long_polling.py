"""PullRequestHoldService's table of max offsets (store/services/long_polling.py)."""

import threading

from store.api import GetMessageResult, GetMessageStatus
from store.services.long_polling import PullRequestHoldService, pull_with_hold


def test_max_offsets_are_kept_per_queue_of_each_topic_while_a_pull_holds():
    hold = PullRequestHoldService()
    with hold.holding():
        hold.on_arrival({("A", 0): 5, ("A", 1): 2, ("B", 0): 9})
        hold.on_arrival({("A", 0): 6})
        assert hold.wait_for_arrival("A", 0, 5, 0) and not hold.wait_for_arrival("A", 0, 6, 0)
        assert hold.wait_for_arrival("A", 1, 1, 0) and not hold.wait_for_arrival("A", 1, 2, 0)
        assert hold.wait_for_arrival("B", 0, 8, 0) and not hold.wait_for_arrival("B", 1, 0, 0)
        assert not hold.wait_for_arrival("C", 0, -1, 0)        # never seen: max offset -1
    hold.on_arrival({("C", 3): 4})           # nobody holds: not kept
    with hold.holding():
        assert not hold.wait_for_arrival("C", 3, 3, 0)
    hold.shutdown()
    assert not hold.wait_for_arrival("A", 0, 0, 0)          # closed: never waits


def _result(status, next_offset):
    return GetMessageResult(status, next_offset, 0, next_offset)


def test_an_arrival_between_the_pull_and_the_wait_wakes_the_hold():
    """The pull finds nothing; dispatch reports the queue's next unit before the wait begins: the
    wait must not miss it (the hold began before the pull)."""
    hold = PullRequestHoldService()
    pulls = []

    def pull(offset):
        pulls.append(offset)
        if len(pulls) == 1:       # the unit lands right after this pull looked
            hold.on_arrival({("T", 0): offset + 1})
            return _result(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset)
        return _result(GetMessageStatus.FOUND, offset + 1)

    done = []
    worker = threading.Thread(target=lambda: done.append(
        pull_with_hold(pull, hold, "T", 0, 7, 30_000, lambda: False)))
    worker.start()
    worker.join(10)
    assert done and done[0].status is GetMessageStatus.FOUND and pulls == [7, 7]
    assert done[0].waited_ms < 10_000
