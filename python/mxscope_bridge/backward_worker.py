"""The observing hooks' work on a thread of its own, so that backward goes on while it runs.

A hook on a layer's output gradient would otherwise hold up the autograd thread for as long as the
layer's telemetry takes to launch (about a millisecond of Python and kernel launches per layer on a
stats step): the GPU runs dry behind it. Here the hook queues the work and returns; one worker thread
runs the items in the order they came, on the stream and device the hook saw, so the kernels and
their results are those of running them in the hook. The queue is short (DEPTH items): a hook waits
while it is full, which bounds the activations and gradients held beyond autograd's own use.

Under torch.distributed the work all-reduces. Collectives issued from this thread on the trainer's
own group could interleave with the trainer's (DDP's buckets) in a different order on each rank, so
there it is opt-in (`Bridge(backward_thread=True)`) and its collectives go over a process group of
the bridge's own (`private_group`), where the worker's order — the backward order — is the same on
every rank; collectives from the autograd thread (emulated layers) keep the trainer's group. Those
all-reduces run on a stream of their own (wgrad_error.WgradErrors._reduce), so that the trainer's
stream never waits for them.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Optional

import torch

#: Layers whose work may wait in the queue (each holds its X, W and ∇Y).
DEPTH = 2

_where = threading.local()


def on_worker_thread() -> bool:
    """Whether the caller runs on a backward worker (and so must use the bridge's own process group)."""
    return getattr(_where, "worker", False)


def private_group(group):
    """A process group of the same ranks as `group` (None: the default group) for the worker's
    collectives; None where it cannot be made without every rank of the world taking part."""
    import torch.distributed as dist
    if group is None or dist.get_world_size(group) == dist.get_world_size():
        return dist.new_group()  # every rank of the world constructs the bridge: all take part
    try:  # a subgroup (e.g. the data-parallel group beside tensor parallelism): its members alone
        return dist.new_group(dist.get_process_group_ranks(group), use_local_synchronization=True)
    except (TypeError, AttributeError):  # torch before 2.1
        return None


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
        _where.worker = True
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
