"""Running a test's work on several threads at once, its errors raised in the test's own thread."""

from __future__ import annotations

import threading
from typing import Callable


def run_threads(work: Callable[[int], object], count: int) -> None:
    """``work(i)`` for i in 0..count-1, each on a thread of its own, all started before any is joined; the first
    exception any of them raised is raised here after all have ended."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
