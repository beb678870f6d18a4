"""PullRequestHoldService's table of max offsets (store/services/long_polling.py)."""

from store.services.long_polling import PullRequestHoldService


def test_max_offsets_are_kept_per_queue_of_each_topic():
    hold = PullRequestHoldService()
    hold.on_arrival({("A", 0): 5, ("A", 1): 2, ("B", 0): 9})
    hold.on_arrival({("A", 0): 6})
    assert hold.wait_for_arrival("A", 0, 5, 0) and not hold.wait_for_arrival("A", 0, 6, 0)
    assert hold.wait_for_arrival("A", 1, 1, 0) and not hold.wait_for_arrival("A", 1, 2, 0)
    assert hold.wait_for_arrival("B", 0, 8, 0) and not hold.wait_for_arrival("B", 1, 0, 0)
    assert not hold.wait_for_arrival("C", 0, -1, 0)        # never seen: max offset -1
    hold.note_max_offset("A", 1, 1)                         # lower: kept at 2
    hold.note_max_offset("C", 3, 4)
    assert hold.wait_for_arrival("A", 1, 1, 0) and hold.wait_for_arrival("C", 3, 3, 0)
    assert not hold.wait_for_arrival("C", 3, 4, 0)
    hold.shutdown()
    assert not hold.wait_for_arrival("A", 0, 0, 0)          # closed: never waits
