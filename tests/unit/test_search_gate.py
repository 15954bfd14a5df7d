"""Searches side by side, or one erasure (memorist.store.gate)."""

from __future__ import annotations

import threading

from memorist.store.gate import SearchGate


def test_searches_go_side_by_side_and_an_erasure_waits_for_them_then_keeps_new_ones_out() -> None:
    gate = SearchGate()
    order: list[str] = []
    erasure_in = threading.Event()

    def erase() -> None:
        with gate.erasure():
            order.append("erasure")
            erasure_in.set()
            threading.Event().wait(0.2)
            order.append("erasure ends")

    def late_search() -> None:
        with gate.search():
            order.append("late search")

    with gate.search(), gate.search():  # two at once: no wait
        eraser = threading.Thread(target=erase)
        eraser.start()
        eraser.join(0.3)
        assert eraser.is_alive() and order == []  # waiting for the searches under way
        late = threading.Thread(target=late_search)
        late.start()
        late.join(0.3)
        assert late.is_alive() and order == []  # a new search waits for the erasure waiting
        order.append("searches end")
    assert erasure_in.wait(5)
    eraser.join(5)
    late.join(5)
    assert order == ["searches end", "erasure", "erasure ends", "late search"]


def test_after_an_erasure_searches_go_in_again() -> None:
    gate = SearchGate()
    with gate.erasure():
        pass
    with gate.search():  # nothing left closed
        pass
