"""The observing hooks' work on a thread of its own, so that backward goes on while it runs.

A hook on a layer's output gradient would otherwise hold up the autograd thread for as long as the
layer's telemetry takes to launch (about a millisecond of Python and kernel launches per layer on a
stats step): the GPU runs dry behind it. Here the hook queues the work and returns; one worker thread
runs the items in the order they came, on the stream and device the hook saw, so the kernels and
their results are those of running them in the hook.

The queue is bounded twice: a hook waits while DEPTH items wait, or while MIN_DEPTH or more wait and
the tensors they hold (a layer's X, W and ∇Y, which autograd would free sooner) would pass HELD_BYTES.
On a capture step the worker is the slower of the two threads (1.2-1.8 ms of host work per layer on an
H100 machine, against ~0.7 ms of the trainer's own backward kernels), so the hooks wait for it; a
deeper queue lets autograd's thread launch the trainer's next layers while the worker is in Python,
and the byte bound keeps a model's largest items (a 32,000-word lm_head's ∇Y: 0.5 GB at 8 × 1024
tokens) from piling up (docs/bridge.md, "Where a capture step's time goes").

Under torch.distributed only in runs with wgradErrorScope "rank", whose work issues no collective
(each rank's own Wgrad error, reduced at end_step). Otherwise the work all-reduces, and collectives
issued from this thread beside the trainer's, even over a process group of the bridge's own on a
stream of its own, hung DDP and FSDP2 runs on 2 × H100 (docs/bridge.md, Distributed): there the work
stays in the hooks, on the autograd thread that issues the trainer's own collectives, in the same
order on every rank. A DTensor operand is gathered in the hook, before the work is queued.
"""
from __future__ import annotations

import collections
import threading
from typing import Callable, Optional

import torch

#: Items that may wait at most (each holds its layer's X, W and ∇Y).
DEPTH = 8
#: Items that may always wait, whatever they hold.
MIN_DEPTH = 2
#: Bytes of tensors that waiting items beyond MIN_DEPTH may hold together.
HELD_BYTES = 512 << 20


def _held_bytes(args) -> int:
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


class BackwardWorker:
    def __init__(self, depth: int = DEPTH, held_bytes: int = HELD_BYTES, min_depth: int = MIN_DEPTH):
        self.depth, self.held_limit, self.min_depth = depth, held_bytes, min(min_depth, depth)
        self._waiting: "collections.deque" = collections.deque()
        self._held = 0  # bytes the waiting items hold
        self._unfinished = 0  # items waiting or running
        self._changed = threading.Condition()
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def submit(self, device: torch.device, work: Callable, *args) -> None:
        """Queue work(*args) (waits while the queue is full); raises what an earlier item raised."""
        self.raise_error()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mxscope-backward", daemon=True)
            self._thread.start()
        stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
        held = _held_bytes(args)
        with self._changed:
            while len(self._waiting) >= self.min_depth and (len(self._waiting) >= self.depth or self._held + held > self.held_limit):
                self._changed.wait()
            self._waiting.append((device, stream, work, args, held))
            self._held += held
            self._unfinished += 1
            self._changed.notify_all()
        self.raise_error()

    def drain(self) -> None:
        """Wait until every queued item has run; raises what one of them raised."""
        with self._changed:
            while self._unfinished:
                self._changed.wait()
        self.raise_error()

    def raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting:
                    self._changed.wait()
                device, stream, work, args, held = self._waiting.popleft()
                self._held -= held
                self._changed.notify_all()
            try:
                if self._error is None:  # after an error the step's remaining items are dropped
                    with torch.no_grad():
                        if stream is not None:
                            with torch.cuda.device(device), torch.cuda.stream(stream):
                                work(*args)
                        else:
                            work(*args)
            except BaseException as error:  # handed to the training thread
                self._error = error
            finally:
                # Held until the next item otherwise: the last layer's X, W and ∇Y, and through the
                # step's capture its stored errors, even after the bridge has closed.
                device = stream = work = args = None
                with self._changed:
                    self._unfinished -= 1
                    self._changed.notify_all()
