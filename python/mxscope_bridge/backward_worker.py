"""The observing hooks' work on a thread of its own, so that backward goes on while it runs.

A hook on a layer's output gradient would otherwise hold up the autograd thread for as long as the
layer's telemetry takes to launch (about a millisecond of Python and kernel launches per layer on a
stats step): the GPU runs dry behind it. Here the hook queues the work and returns; one worker thread
runs the items in the order they came. The queue is short (DEPTH items): a hook waits while it is
full, which bounds the activations and gradients held beyond autograd's own use.

On CUDA the items' kernels run on a stream of the worker's own, beside the trainer's backward rather
than between its kernels, which then no longer queue behind the bridge's (1.1 B Llama, 8 × 1024
tokens, H200, in turns in one process: statsEvery 10 +9.3 % and +8.2 % over plain steps against
+10.8 % and +9.0 % on the trainer's stream; docs/bridge.md). Three orderings keep the results those
of running the work in the hook:
- an item starts after everything the trainer's stream had been given when the hook queued it (an
  event), so ∇Y, X and W are complete;
- every tensor an item is handed is marked used by the worker's stream (`record_stream`), so the
  caching allocator gives its memory to nothing else before the worker's kernels are done with it,
  though autograd drops its own references at once;
- `drain` makes the trainer's stream wait for the worker's, so what end_step reads is complete.

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
from typing import Callable, Dict, Iterator, Optional

import torch

#: Layers whose work may wait in the queue (each holds its X, W and ∇Y).
DEPTH = 2


def _tensors(values) -> Iterator[torch.Tensor]:
    """The tensors among an item's arguments, also inside tuples and lists."""
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (tuple, list)):
            yield from _tensors(value)


class BackwardWorker:
    def __init__(self, depth: int = DEPTH):
        self._queue: "queue.Queue" = queue.Queue(maxsize=depth)
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        #: the worker's stream on each CUDA device it has run on
        self._streams: Dict[torch.device, "torch.cuda.Stream"] = {}

    def submit(self, device: torch.device, work: Callable, *args) -> None:
        """Queue work(*args) (waits while the queue is full); raises what an earlier item raised."""
        self.raise_error()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mxscope-backward", daemon=True)
            self._thread.start()
        stream = ready = None
        if device.type == "cuda":
            ready = torch.cuda.current_stream(device).record_event()
            stream = self.stream(device)
            for tensor in _tensors(args):
                if tensor.is_cuda:
                    tensor.record_stream(stream)
        self._queue.put((device, stream, ready, work, args))
        self.raise_error()

    def stream(self, device: torch.device) -> "torch.cuda.Stream":
        """The stream the worker's kernels run on, on a CUDA device."""
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = torch.cuda.Stream(device)
        return stream

    def drain(self) -> None:
        """Wait until every queued item has run, and make the current streams wait for their kernels;
        raises what one of them raised."""
        if self._thread is not None:
            self._queue.join()
        for device, stream in self._streams.items():
            torch.cuda.current_stream(device).wait_stream(stream)
        self.raise_error()

    def raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            device, stream, ready, work, args = self._queue.get()
            try:
                if self._error is None:  # after an error the step's remaining items are dropped
                    with torch.no_grad():
                        if stream is not None:
                            with torch.cuda.device(device), torch.cuda.stream(stream):
                                stream.wait_event(ready)
                                work(*args)
                        else:
                            work(*args)
            except BaseException as error:  # handed to the training thread
                self._error = error
            finally:
                # Held until the next item otherwise: the last layer's X, W and ∇Y, and through the
                # step's capture its stored errors, even after the bridge has closed.
                device = stream = ready = work = args = None
                self._queue.task_done()
