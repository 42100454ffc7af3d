"""Tensor parallelism (column- then row-parallel Linear pair, examples/tp_pair.py) on two gloo ranks on
CPU: the bridge observes each sharded layer whole, so its records equal an unsharded run's. Needs
torch.distributed.tensor.parallel (torch 2.4 and later): skipped on Debian's torch 1.13; runs where a
recent torch is installed (the GPU machines, with CUDA hidden or not)."""
import os
import socket
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES)

try:
    from torch.distributed.tensor.parallel import ColwiseParallel  # noqa: F401
    HAS_TENSOR_PARALLEL = dist.is_available()
except ImportError:
    HAS_TENSOR_PARALLEL = False

SHAPE = dict(dim=64, hidden=256, tokens=128, steps=3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sharded_rank(rank, port, out):
    from tp_pair import observe_pair
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    status = observe_pair(out, device="cpu", sharded=True, **SHAPE)
    dist.barrier()
    dist.destroy_process_group()
    if status != "completed":
        raise RuntimeError(f"rank {rank}: the sharded run {status}")


@unittest.skipUnless(HAS_TENSOR_PARALLEL, "needs torch.distributed.tensor.parallel (torch 2.4+); Debian's torch 1.13 has none")
class TensorParallel(unittest.TestCase):
    def test_sharded_layers_are_reported_whole_as_in_the_unsharded_run(self):
        from tp_compare import compare
        from tp_pair import observe_pair
        out = tempfile.mkdtemp(prefix="mxscope-tp-test-")
        single, sharded = os.path.join(out, "single.ndjson"), os.path.join(out, "sharded.ndjson")
        self.assertEqual(observe_pair(single, device="cpu", sharded=False, **SHAPE), "completed")
        mp.spawn(sharded_rank, args=(free_port(), sharded), nprocs=2, join=True)
        result = compare(single, sharded)
        keys_single, keys_sharded = result["keys"]
        self.assertEqual(keys_sharded, keys_single)
        # Both layers' three GEMMs every step, less the first layer's Dgrad: its input is data, which
        # needs no gradient, so that GEMM never runs and is not reported.
        self.assertEqual(len(keys_single), SHAPE["steps"] * (2 * 3 - 1), "both layers' GEMMs that run, every step")
        # X and W are gathered exactly; ∇Y may differ in the last bits (the row-parallel output is a sum
        # of partial products all-reduced in another order), never in its shape.
        for (key, operand) in result["different"]:
            self.assertEqual(operand, "dy", f"{key} {operand}: {result['differences'][(key, operand)]}")
            self.assertNotIn("blocks", result["differences"][(key, operand)])
            self.assertNotIn("elements", result["differences"][(key, operand)])
        self.assertGreaterEqual(len(result["equal"]), SHAPE["steps"] * 2 * 4, "every x and w operand identical")
        for field in ("gradNorm", "errNorm", "relErr"):
            self.assertLess(result["worst"][field], 1e-3, field)


if __name__ == "__main__":
    unittest.main()
