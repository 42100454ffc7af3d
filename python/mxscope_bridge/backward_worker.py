"""The observing hooks' work on a thread of its own, so that backward goes on while it runs.

A hook on a layer's output gradient would otherwise hold up the autograd thread for as long as the
layer's telemetry takes to launch (about a millisecond of Python and kernel launches per layer on a
stats step): the GPU runs dry behind it. Here the hook queues the work and returns; one worker thread
runs the items in the order they came, on the stream and device the hook saw, so the kernels and
their results are those of running them in the hook. The queue is short (DEPTH items): a hook waits
while it is full, which bounds the activations and gradients held beyond autograd's own use.

Under torch.distributed only in runs with wgradErrorScope "rank", whose work issues no collective
(each rank's own Wgrad error, reduced at end_step). Otherwise the work all-reduces, and collectives
issued from this thread beside the trainer's, even over a process group of the bridge's own on a
stream of its own, hung DDP and FSDP2 runs on 2 × H100 (docs/bridge.md, Distributed): there the work
stays in the hooks, on the autograd thread that issues the trainer's own collectives, in the same
order on every rank. A DTensor operand is gathered in the hook, before the work is queued.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Optional

import torch

#: Layers whose work may wait in the queue (each holds its X, W and ∇Y).
DEPTH = 2

class BackwardWorker:
    def __init__(self, depth: int = DEPTH):
        self._queue: "queue.Queue" = queue.Queue(maxsize=depth)
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def submit(self, device: torch.device, work: Callable, *args) -> None:
        """Queue work(*args) (waits while the queue is full); raises what an earlier item raised."""
        self.raise_error()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mxscope-backward", daemon=True)
            self._thread.start()
        stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
        self._queue.put((device, stream, work, args))
        self.raise_error()

    def drain(self) -> None:
        """Wait until every queued item has run; raises what one of them raised."""
        if self._thread is not None:
            self._queue.join()
        self.raise_error()

    def raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            device, stream, work, args = self._queue.get()
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
                self._queue.task_done()
