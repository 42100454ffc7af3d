"""What the Trainer callbacks share, under DDP: two gloo ranks on CPU. A step's loss is the ranks'
mean, as transformers' Trainer logs it (rank 0's own loss before), the tokens are every rank's, and
a rank without a loss leaves the step's loss null instead of leaving the other rank waiting in the
collective."""
import unittest

import torch

from mxscope_bridge import run_config
from mxscope_bridge.trainer_runs import TrainerRuns
from tests.helpers import TinyNet, read_log
from tests.test_distributed import end_rank, in_ranks, join_gloo, rank_result, save_result

#: Each rank's loss at each step (None: the rank's hook saw none).
LOSSES = [(2.0, 4.0), (1.0, 1.5), (2.0, None)]


def worker(rank, port, out_dir):
    join_gloo(rank, port)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(TinyNet())
    runs = TrainerRuns("TestCallback", "accumulation", run_config(stats_every=100), dict(serve=False, out_dir=out_dir, handle_exit=False))
    runs.start(model, 1, len(LOSSES), lambda config: config)
    for step, losses in enumerate(LOSSES):
        runs.bridge.begin_step(step)
        runs.count(10 * (rank + 1))
        loss = losses[rank]
        runs.end_step(torch.tensor(loss) if loss is not None else None, 1e-3)
    run_dir = runs.bridge.run_dir
    runs.end(len(LOSSES))
    runs.close()
    save_result(run_dir, rank_result(out_dir, rank))
    end_rank()


class UnderDDP(unittest.TestCase):
    def test_the_steps_loss_is_the_ranks_mean_and_its_tokens_every_ranks(self):
        run_dir, _ = in_ranks(worker, "mxscope-trainer-runs-")
        steps = [r for r in read_log(run_dir) if r["type"] == "step"]
        self.assertEqual([r["loss"] for r in steps], [3.0, 1.25, None])
        # Each rank counts its own batches and publishes count × world: rank 0's 10 tokens a step.
        self.assertEqual([r["tokens"] for r in steps], [20, 40, 60])


if __name__ == "__main__":
    unittest.main()
