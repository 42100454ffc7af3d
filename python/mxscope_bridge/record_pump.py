"""Telemetry handed over by the training thread and delivered, in order, by a thread of its own.

`publish` never blocks and never waits for the GPU: a step record whose loss is still on the device
(deferred.py) and a stats step's layerStats (step_stats.py, built from pinned copies) are resolved
where they are delivered. When `max_queued_stats` layerStats records wait, further ones are dropped
and counted; run, step and checkpoint records are always kept. The trainer server delivers to its
sockets and the run log through one; a bridge that does not serve writes its run log through one.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable

#: The pump's pause between the records of a stats batch (see RecordPump._yield).
PUMP_YIELD_S = 1e-4
_STOP = {"type": "the pump thread ends here"}


def stats_count(record) -> int:
    """layerStats records a queued item stands for."""
    if isinstance(record, dict):
        return 1 if record.get("type") == "layerStats" else 0
    return record.count


class RecordPump:
    """`deliver(record)` runs on the pump thread for every record, in publish order; a batch (an object
    with `count` and `records()`, e.g. step_stats.StepStats) is built there record by record."""

    def __init__(self, deliver: Callable[[dict], None], log: Callable[[str], None], max_queued_stats: int = 20000):
        self.dropped_stats = 0
        self._deliver = deliver
        self._log = log
        self._max_queued_stats = max_queued_stats
        self._queued_stats = 0
        self._pending = 0
        self._idle = threading.Condition()
        self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
        threading.Thread(target=self._run, name="mxscope-publisher", daemon=True).start()

    def publish(self, record) -> bool:
        """Queue a record or a batch; never blocks. False when layerStats were dropped: all of a batch
        that does not fit under max_queued_stats."""
        count = stats_count(record)
        with self._idle:
            if count and self._queued_stats + count > self._max_queued_stats:
                self.dropped_stats += count
                return False
            self._queued_stats += count
            self._pending += 1
        self._queue.put(record)
        return True

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued record is delivered."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        self.flush()
        self._queue.put(_STOP)

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            if record is _STOP:
                return
            try:
                if isinstance(record, dict):
                    self._deliver(record)
                else:
                    for built in record.records():
                        self._deliver(built)
                        self._yield()
            except Exception as error:  # a bad record must not kill the pump
                kind = record.get("type") if isinstance(record, dict) else "layerStats"
                self._log(f"could not publish a {kind} record: {error}")
            finally:
                with self._idle:
                    self._queued_stats -= stats_count(record)
                    self._pending -= 1
                    self._idle.notify_all()

    @staticmethod
    def _yield() -> None:
        # Hand the GIL back after each record of a stats batch (single records need no pause: a
        # pause per record let a fast loop's step records pile up and a stopRun's ack wait on them):
        # the training thread releases it around every kernel launch and would otherwise wait up to
        # the interpreter's switch interval (5 ms) for it each time while a stats step's few hundred
        # records encode. A zero sleep often takes the GIL straight back; a short one lets the
        # waiting thread have it.
        time.sleep(PUMP_YIELD_S)
