"""The Trainer callbacks' gradient norm: the norm clip_grad_norm_ reports, taken where backward ends,
before a clip changes the gradients, over the gradients a step accumulated, and after what the pass
queued to run at its end (DDP's averaging)."""
import unittest

import torch

from mxscope_bridge.grad_norm import NormAfterBackward, total_norm
from tests.test_distributed import end_rank, in_ranks, join_gloo, rank_result, save_result


def model():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))
    net[0].weight.requires_grad_(False)  # a frozen layer: no gradient, as a LoRA base weight
    return net


def loss_of(net, seed=1):
    ids = torch.randint(0, 10, (4, 6), generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.cross_entropy(net(ids).flatten(0, 1), ids.flatten()) * 50


def clipped_norm(net, max_norm=0.1):
    """What the Trainer logs: clip_grad_norm_'s total norm (before it clips)."""
    return float(torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm))


class TotalNorm(unittest.TestCase):
    def test_is_the_norm_clip_grad_norm_reports(self):
        net = model()
        loss_of(net).backward()
        ours = float(total_norm(net.parameters()))
        self.assertAlmostEqual(ours, clipped_norm(net), delta=1e-5 * ours)

    def test_none_without_gradients_or_on_a_ranks_shard(self):
        net = model()
        self.assertIsNone(total_norm(net.parameters()), "before any backward")
        loss_of(net).backward()
        net[1].weight._fsdp_flattened = True  # what FSDP1 marks its flattened parameters with
        self.assertIsNone(total_norm(net.parameters()))


class AfterBackward(unittest.TestCase):
    def test_a_norm_that_cannot_be_taken_never_fails_the_backward(self):
        net = model()
        logged = []

        def broken():
            raise RuntimeError("no parameters today")
        norms = NormAfterBackward(broken, logged.append)
        loss = loss_of(net)
        norms.arm(loss)
        loss.backward()  # does not raise
        self.assertIsNone(norms.take())
        self.assertEqual(len(logged), 1)
        self.assertIn("no parameters today", logged[0])
        loss = loss_of(net)
        norms.arm(loss)
        loss.backward()
        self.assertEqual(len(logged), 1, "not armed again after it failed")
        self.assertTrue(NormAfterBackward.usable())

    def test_the_norm_before_the_clip_that_follows_backward(self):
        net = model()
        norms = NormAfterBackward(net.parameters, self.fail)
        loss = loss_of(net)
        norms.arm(loss)
        loss.backward()
        before = clipped_norm(net, max_norm=0.1)
        self.assertGreater(before, 0.2, "the clip below changes the gradients")
        self.assertLess(float(total_norm(net.parameters())), 0.11)
        self.assertAlmostEqual(float(norms.take()), before, delta=1e-5 * before)
        self.assertIsNone(norms.take(), "taken once")

    def test_accumulated_micro_batches_give_the_norm_of_their_sum(self):
        net = model()
        norms = NormAfterBackward(net.parameters, self.fail)
        for seed in (1, 2, 3):
            loss = loss_of(net, seed) / 3
            norms.arm(loss)
            loss.backward()
        self.assertAlmostEqual(float(norms.take()), clipped_norm(net), delta=1e-5)

    def test_runs_after_what_the_pass_queued_for_its_end(self):
        # DDP averages the gradients in a final callback that its first gradient hook queues, later
        # in the pass than the loss's hook: the norm must be of the averaged gradients.
        net = model()
        engine = torch.autograd.Variable._execution_engine

        def average():
            for p in net.parameters():
                if p.grad is not None:
                    p.grad.mul_(0.25)
        queued = []
        net[3].bias.register_hook(lambda grad: queued.append(engine.queue_callback(average)))
        norms = NormAfterBackward(net.parameters, self.fail)
        loss = loss_of(net)
        norms.arm(loss)
        loss.backward()
        self.assertEqual(len(queued), 1)
        self.assertAlmostEqual(float(norms.take()), clipped_norm(net), delta=1e-5)

    def test_a_loss_that_needs_no_gradient_arms_nothing(self):
        net = model()
        norms = NormAfterBackward(net.parameters, self.fail)
        with torch.no_grad():
            norms.arm(loss_of(net))
        loss = loss_of(net)
        loss.backward()
        self.assertIsNone(norms.take(), "the backward above was not armed")


def ddp_worker(rank, port, out_dir):
    join_gloo(rank, port)
    net = model()  # the same weights on every rank
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    norms = NormAfterBackward(ddp.parameters, print)
    result = []
    for step in range(2):
        loss = loss_of(ddp, seed=10 * step + rank) * (1 + 2 * rank)  # different data and scale per rank
        norms.arm(loss)
        loss.backward()
        ours = float(norms.take())
        averaged = clipped_norm(ddp)  # after backward: DDP's mean of the ranks' gradients
        net.zero_grad()
        with ddp.no_sync():  # this rank's own gradient, not averaged
            (loss_of(ddp, seed=10 * step + rank) * (1 + 2 * rank)).backward()
        result.append((ours, averaged, float(total_norm(net.parameters()))))
        net.zero_grad()
    save_result(result, rank_result(out_dir, rank))
    end_rank()


class UnderDDP(unittest.TestCase):
    def test_the_norm_is_of_the_gradients_ddp_averaged(self):
        for rank, steps in enumerate(in_ranks(ddp_worker, "mxscope-norm-ddp-")):
            for ours, averaged, local in steps:
                self.assertAlmostEqual(ours, averaged, delta=1e-5 * averaged, msg=f"rank {rank}")
                self.assertGreater(abs(local - averaged), 0.1 * averaged, "each rank's own gradient differs from the mean")


if __name__ == "__main__":
    unittest.main()
