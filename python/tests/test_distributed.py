"""Two gloo ranks on CPU, model wrapped in DDP: rank 0 publishes histograms that are the sums of the ranks' own, and the
Wgrad error of the whole data-parallel batch (E and ∇W averaged over ranks, like DDP's gradient)."""
import faulthandler
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mxscope_bridge import Bridge, emulate, run_config, stats, wgrad_error  # noqa: E402
from tests.helpers import TinyNet, bridge_for, mx_gemms, read_log  # noqa: E402
from tests.wsclient import Client  # noqa: E402

WORLD = 2
STEPS = 6  # stats at steps 0 and 5 (statsEvery 5); E also at step 4 for lag-1


#: How long two ranks may take to save their results.
RANKS_TIMEOUT_S = 300
#: How long ranks may take to exit once both saved their results (end_rank: a barrier, then exit).
TEARDOWN_GRACE_S = 30


def save_result(obj, path):
    """torch.save through a temporary file, so that the file exists only whole."""
    torch.save(obj, path + ".part")
    os.replace(path + ".part", path)


def run_ranks(target, args, results):
    """target(rank, *args) on WORLD processes, each saving its entry of `results` (paths) with
    save_result, then calling end_rank; what they saved. A rank that raises fails the test, and so
    do results missing after RANKS_TIMEOUT_S and ranks still alive TEARDOWN_GRACE_S after every
    result was saved. Ranks stopped so first write every thread's Python stack, which the failure
    quotes: a hang that CI alone shows then says where each rank was."""
    stacks = [os.path.join(os.path.dirname(results[0]), f"stacks{rank}.txt") for rank in range(WORLD)]
    context = mp.spawn(_dumping_stacks, args=(target, stacks, *args), nprocs=WORLD, join=False)
    deadline, saved_at, stopped = time.monotonic() + RANKS_TIMEOUT_S, None, ""
    while not context.join(timeout=1):
        now = time.monotonic()
        if saved_at is None and all(os.path.exists(path) for path in results):
            saved_at = now
        if (saved_at is not None and now - saved_at > TEARDOWN_GRACE_S) or now > deadline:
            stopped = _stop(context.processes, stacks)
            break
    missing = [path for path in results if not os.path.exists(path)]
    if missing:
        raise AssertionError(f"the ranks did not save {missing} within {RANKS_TIMEOUT_S} s; their threads' stacks:\n{stopped}")
    if stopped:
        raise AssertionError(f"the ranks saved their results but had not exited {TEARDOWN_GRACE_S} s later; their threads' stacks:\n{stopped}")
    return [torch.load(path) for path in results]


def join_gloo(rank, port):
    """A rank's first call: join the WORLD-rank gloo group on this machine."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)


def rank_result(out_dir, rank):
    """Where rank `rank` of `in_ranks` saves its result (save_result)."""
    return os.path.join(out_dir, f"result{rank}.pt")


def in_ranks(target, prefix):
    """target(rank, port, out_dir) on WORLD processes, each calling join_gloo, saving its result to
    rank_result(out_dir, rank) and ending with end_rank: the ranks' results (run_ranks)."""
    out = tempfile.mkdtemp(prefix=prefix)
    return run_ranks(target, (free_port(), out), [rank_result(out, rank) for rank in range(WORLD)])


def _dumping_stacks(rank, target, stacks, *args):
    """target(rank, *args), writing every thread's stack to stacks[rank] on SIGUSR1 (the file stays
    open until the process ends: a rank may hang after target returns, in the interpreter's exit)."""
    faulthandler.register(signal.SIGUSR1, file=open(stacks[rank], "w"), all_threads=True)
    target(rank, *args)


def _stop(processes, stacks) -> str:
    """Kill the ranks still alive, after each wrote its threads' stacks: those stacks, rank by rank."""
    alive = [(rank, process) for rank, process in enumerate(processes) if process.is_alive()]
    for _, process in alive:
        os.kill(process.pid, signal.SIGUSR1)
    time.sleep(1)  # faulthandler writes from its signal handler, at once
    for _, process in alive:
        process.kill()
        process.join()
    return "".join(f"--- rank {rank}\n{_read(stacks[rank])}" for rank, _ in alive)


def _read(path) -> str:
    try:
        with open(path) as file:
            return file.read()
    except FileNotFoundError:  # the rank had not yet reached target
        return "(none written)\n"


def end_rank():
    """A rank's last call, once its result is saved: meet the other ranks (none leaves while a peer
    may still read from it), then exit without running torch's destructors.

    Freeing the DDP model frees its Reducer, whose ~ProcessGroupGloo joins gloo's worker threads
    with the GIL held. A worker still releasing a finished collective whose tensor only it holds
    (the caller already dropped its own) must take the GIL to free that tensor's Python object
    (TensorImpl::destroy_pyobj_if_needed): a deadlock. gdb on hung ranks showed exactly that: the
    main thread in std::thread::join under ~Reducer, a gloo thread in PyEval_AcquireThread. Without
    the barrier a quarter of the runs hung so on torch 1.13. The barrier narrows the window (the
    gloo thread can take the GIL while the main thread waits in it) without closing it: a gloo
    thread kept off the CPU through the barrier still deadlocks (twice in 59 runs of this file with
    both ranks on one busy core), the likeliest cause of a 20-min hang of this file in CI.
    os._exit runs no destructor at all."""
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_net(emulated: bool):
    """TinyNet with seed 0's weights, its layers emulated in MXFP4 (mx_gemms) with `emulated`."""
    torch.manual_seed(0)
    model = TinyNet()
    if emulated:
        emulate(model, mx_gemms())
    return model


def worker(rank, port, out_dir, seqs=(16, 16), chunk_bytes=None, micro_batches=1, layer_groups=1, scope="batch", emulated=False):
    """`seqs`: each rank's sequence length; `chunk_bytes`: wgrad_error.CHUNK_BYTES (row chunks of E);
    `micro_batches`: backward passes per step (gradient accumulation); `layer_groups`: stats_layer_groups;
    `scope`: wgrad_error_scope; `emulated`: the layers run emulated MXFP4 (the Wgrad error then comes
    from the emulated GEMMs, not from hooks)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if chunk_bytes is not None:
        wgrad_error.CHUNK_BYTES = chunk_bytes
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    model = torch.nn.parallel.DistributedDataParallel(tiny_net(emulated))  # the same weights on every rank; grads become the ranks' mean
    local = {}
    bridge = bridge_for(model, out_dir, on_local_stats=lambda step, keys, vectors: local.setdefault(step, (keys, vectors)),
                        micro_batches=micro_batches, stats_layer_groups=layer_groups, wgrad_error_scope=scope)
    bridge.start_run()
    threads = {"worker": bridge.backward_worker is not None}
    generator = torch.Generator().manual_seed(100 + rank)  # different data per rank
    grads = {}
    for step in range(STEPS):
        bridge.begin_step(step)
        for _ in range(micro_batches):
            loss = model(torch.randn(4, seqs[rank], 64, generator=generator).requires_grad_()).pow(2).mean() / micro_batches
            loss.backward()
        bridge.end_step(loss=loss.item())
        grads[step] = model.module.lm_head.weight.grad.clone()
        model.zero_grad()
    run_dir = bridge.run_dir
    threads["worker ran"] = getattr(bridge.backward_worker, "_thread", None) is not None  # started by a hook's first item
    bridge.end_run()
    bridge.close()
    save_result({"local": local, "grads": grads, "run_dir": run_dir, **threads}, os.path.join(out_dir, f"rank{rank}.pt"))
    end_rank()


def one_process_over_both_ranks(out_dir, seqs=(16, 16), micro_batches=1, layer_groups=1, ranks=tuple(range(WORLD)), emulated=False):
    """The run of `worker` in one process, on both ranks' tokens at once: its loss is the mean of the
    ranks' losses, so its gradient is their mean gradient. Each rank's tokens fill whole 32-token
    blocks, so its ∇Ŵ is the ranks' mean ∇Ŵ as well, and so is its Wgrad error.
    `ranks=(r,)`: on rank r's tokens alone, its loss and gradient rank r's own."""
    model = tiny_net(emulated)
    bridge = bridge_for(model, out_dir, micro_batches=micro_batches, stats_layer_groups=layer_groups)
    bridge.start_run()
    generators = [torch.Generator().manual_seed(100 + rank) for rank in ranks]
    for step in range(STEPS):
        bridge.begin_step(step)
        for _ in range(micro_batches):
            parts = [torch.randn(4, seqs[rank], 64, generator=g).reshape(1, -1, 64) for g, rank in zip(generators, ranks)]
            y = model(torch.cat(parts, dim=1).requires_grad_())
            bounds = [0] + [sum(part.shape[1] for part in parts[:i + 1]) for i in range(len(parts))]
            loss = sum(y[:, a:b].pow(2).mean() for a, b in zip(bounds, bounds[1:])) / len(ranks) / micro_batches
            loss.backward()
        bridge.end_step(loss=loss.item())
        model.zero_grad()
    run_dir = bridge.run_dir
    bridge.end_run()
    bridge.close()
    return read_log(run_dir)


def wgrad_errors(records):
    """{(step, layer): wgradError} of the Wgrad layerStats records."""
    return {(r["step"], r["layer"]): r["wgradError"] for r in records if r["type"] == "layerStats" and r["gemm"] == "wgrad"}


def assert_errors_close(test, got, want, relative=1e-5, list_relative=1e-5):
    """The same (step, layer) keys, and each Wgrad error field of `want` in `got`: numbers within
    `relative` (of at least 1), lists of as many entries within `list_relative` of their largest, the
    rest (None) equal."""
    test.assertEqual(sorted(got), sorted(want))
    for key, error in want.items():
        for field, value in error.items():
            if isinstance(value, float):
                test.assertAlmostEqual(got[key][field], value, delta=relative * max(1.0, abs(value)), msg=f"{key} {field}")
            elif isinstance(value, list):
                test.assertEqual(len(got[key][field]), len(value), f"{key} {field}")
                scale = max(abs(v) for v in value)
                for a, b in zip(got[key][field], value):
                    test.assertAlmostEqual(a, b, delta=list_relative * scale, msg=f"{key} {field}")
            else:
                test.assertEqual(got[key][field], value, f"{key} {field}")


def assert_same_wgrad_errors(test, records, reference, expected=2 * 5):
    """Every Wgrad error record of `records` (stats steps 0 and 5: `expected` layers in all) against `reference`'s."""
    got, want = wgrad_errors(records), wgrad_errors(reference)
    test.assertEqual(len(got), expected)
    for key, error in want.items():
        if key[0] == 5:  # the step before it kept E
            test.assertIsNotNone(error["lag1Cos"], key)
    assert_errors_close(test, got, want)


def press_start_twice_then_stop(url):
    """The extension on rank 0: a run with rotation none, then a Hadamard run stopped at step 3."""
    client = Client(url)
    client.recv()
    client.send({"type": "subscribe", "id": "s"})
    for i, rotation in enumerate(("none", "hadamard")):
        client.send({"type": "setNextRunConfig", "id": f"c{i}", "change": {"gemms": {"wgrad": {"rotation": rotation}}}})
        client.send({"type": "startRun", "id": f"r{i}"})
        client.recv_until(lambda m: m.get("type") == "step" and m["step"] == 3 or m.get("type") == "runEnded")
        if i == 1:
            client.send({"type": "stopRun", "id": "stop"})
        client.recv_until(lambda m: m.get("type") == "runEnded")


def runs_worker(rank, port, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(TinyNet())
    bridge = Bridge(model, run_config(steps=40, stats_every=5, tokens_per_step=64), out_dir=out_dir, port=0, print_listening=False, handle_exit=False)
    if rank == 0:
        threading.Thread(target=press_start_twice_then_stop, args=(bridge.server.connect_url,), daemon=True).start()
    seen = []
    for run in bridge.runs(max_runs=2, idle_timeout=60):  # a broken client must not hang the suite
        steps = 0
        for _ in run.steps(6 if not seen else None):
            model(torch.randn(2, 8, 64)).pow(2).mean().backward()
            run.end_step(loss=1.0)
            steps += 1
        seen.append((run.id, run.gemms["wgrad"]["rotation"], steps))
    bridge.close()
    save_result(seen, os.path.join(out_dir, f"runs{rank}.pt"))
    end_rank()


def save_then_hang(rank, out_dir):
    """Both ranks save their result; rank 1 then never exits, as a rank hung in teardown would not."""
    save_result(rank, os.path.join(out_dir, f"hang{rank}.pt"))
    if rank == 1:
        threading.Event().wait()


class RunRanks(unittest.TestCase):
    def test_ranks_that_saved_but_never_exit_fail_the_test_with_their_threads_stacks(self):
        out = tempfile.mkdtemp(prefix="mxscope-dist-hang-")
        with mock.patch.object(sys.modules[__name__], "TEARDOWN_GRACE_S", 1), self.assertRaises(AssertionError) as raised:
            run_ranks(save_then_hang, (out,), [os.path.join(out, f"hang{r}.pt") for r in range(WORLD)])
        message = str(raised.exception)
        self.assertIn("had not exited", message)
        self.assertRegex(message, r"--- rank 1\n(.|\n)*line \d+ in save_then_hang")


class RunLoopOnTwoRanks(unittest.TestCase):
    def test_every_rank_follows_rank_0s_start_config_and_stop(self):
        out = tempfile.mkdtemp(prefix="mxscope-dist-runs-")
        seen = run_ranks(runs_worker, (free_port(), out), [os.path.join(out, f"runs{r}.pt") for r in range(WORLD)])
        self.assertEqual(seen[0], seen[1], "same runs, configs and step counts on both ranks")
        (_, first, first_steps), (run_id, second, second_steps) = seen[0]
        self.assertEqual((first, first_steps, second), ("none", 6, "hadamard"))
        self.assertLess(second_steps, 40, "the stop reached both ranks")
        self.assertEqual(read_log(os.path.join(out, run_id))[-1]["status"], "stopped")


class DataParallel(unittest.TestCase):
    """The observing work in the hooks (under torch.distributed, unless wgradErrorScope is "rank")."""

    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="mxscope-dist-")
        cls.ranks = run_ranks(worker, (free_port(), cls.out), [os.path.join(cls.out, f"rank{r}.pt") for r in range(WORLD)])
        cls.records = read_log(cls.ranks[0]["run_dir"])

    def test_where_the_observing_work_runs(self):
        self.assertEqual([rank["worker"] for rank in self.ranks], [False] * WORLD)

    def test_only_rank_0_publishes_with_layer_names_free_of_the_ddp_wrapper(self):
        self.assertIsNone(self.ranks[1]["run_dir"])
        started = [r for r in self.records if r["type"] == "runStarted"]
        self.assertEqual(len(started), 1)
        self.assertEqual([layer["name"] for layer in started[0]["layers"]], ["blocks.0.up", "blocks.0.down", "blocks.1.up", "blocks.1.down", "lm_head"])

    def test_published_histograms_are_the_sum_of_the_ranks(self):
        published = {(r["step"], r["layer"], r["gemm"], o["operand"]): o for r in self.records if r["type"] == "layerStats" for o in r["operands"]}
        checked = 0
        for step in (0, 5):
            keys, vectors0 = self.ranks[0]["local"][step]
            vectors1 = self.ranks[1]["local"][step][1]
            self.assertFalse(torch.equal(vectors0, vectors1), "ranks saw different data")
            for row, key in enumerate(keys):
                got = published[(step, *key)]
                want = stats.operand_stats(key[2], (vectors0[row] + vectors1[row]).tolist())
                own = [stats.operand_stats(key[2], v[row].tolist()) for v in (vectors0, vectors1)]
                self.assertEqual(got["histogram"], want["histogram"])
                self.assertEqual(got["blocks"], own[0]["blocks"] + own[1]["blocks"])
                self.assertEqual(got["elements"], own[0]["elements"] + own[1]["elements"])
                checked += 1
        self.assertEqual(checked, 2 * 5 * 6)

    def test_wgrad_error_describes_the_mean_gradient(self):
        for step in (0, 5):
            record = next(r for r in self.records if r["type"] == "layerStats" and r["step"] == step and r["layer"] == "lm_head" and r["gemm"] == "wgrad")
            mean_grad = (self.ranks[0]["grads"][step] + self.ranks[1]["grads"][step]) / WORLD
            self.assertAlmostEqual(record["wgradError"]["gradNorm"], mean_grad.norm().item(), places=5)
        self.assertIsNotNone(record["wgradError"]["lag1Cos"])

    def test_wgrad_error_is_one_process_over_both_ranks_tokens(self):
        # Each rank sums its part of every chunk of E (and keeps that part's E_{t−1}): the parts add up.
        reference = one_process_over_both_ranks(tempfile.mkdtemp(prefix="mxscope-dist-one-"))
        assert_same_wgrad_errors(self, self.records, reference)



class DataParallelOtherTokens(unittest.TestCase):
    """Ranks with other tokens (padded batches): E's row chunks followed the tokens, so the ranks
    all-reduced chunks of other sizes. They now cut the same chunks and split ∇Yᵀ within them."""

    def test_ranks_cut_the_same_chunks(self):
        out = tempfile.mkdtemp(prefix="mxscope-dist-tokens-")
        # A row of E is 64 × 4 = 256 bytes: 6 rows a chunk; rank 1's ∇Yᵀ (160 tokens) takes 320 bytes a row.
        ranks = run_ranks(worker, (free_port(), out, (16, 40), 6 * 256), [os.path.join(out, f"rank{r}.pt") for r in range(WORLD)])
        records = read_log(ranks[0]["run_dir"])
        record = next(r for r in records if r["type"] == "layerStats" and r["step"] == 5 and r["layer"] == "lm_head" and r["gemm"] == "wgrad")
        mean_grad = (ranks[0]["grads"][5] + ranks[1]["grads"][5]) / WORLD
        self.assertAlmostEqual(record["wgradError"]["gradNorm"], mean_grad.norm().item(), places=5)
        self.assertIsNotNone(record["wgradError"]["lag1Cos"])
        assert_same_wgrad_errors(self, records, one_process_over_both_ranks(tempfile.mkdtemp(prefix="mxscope-dist-one-"), (16, 40)))


class DataParallelMicroBatches(unittest.TestCase):
    """micro_batches=2: each layer's ∇Ŵ and ∇W summed over the step's two backward passes, then
    reduced whole at end_step, each rank keeping its part."""

    def test_wgrad_error_is_one_process_over_both_ranks_micro_batches(self):
        out = tempfile.mkdtemp(prefix="mxscope-dist-micro-")
        options = ((16, 16), None, 2)  # seqs, chunk_bytes, micro_batches
        ranks = run_ranks(worker, (free_port(), out, *options), [os.path.join(out, f"rank{r}.pt") for r in range(WORLD)])
        reference = one_process_over_both_ranks(tempfile.mkdtemp(prefix="mxscope-dist-one-"), micro_batches=2)
        assert_same_wgrad_errors(self, read_log(ranks[0]["run_dir"]), reference)


class DataParallelLayerGroups(unittest.TestCase):
    """stats_layer_groups=2: each stats step reduces its group's layers; the step before keeps that
    group's part of E on each rank."""

    def test_wgrad_error_is_one_process_over_both_ranks_layer_groups(self):
        out = tempfile.mkdtemp(prefix="mxscope-dist-groups-")
        options = ((16, 16), None, 1, 2)  # seqs, chunk_bytes, micro_batches, layer_groups
        ranks = run_ranks(worker, (free_port(), out, *options), [os.path.join(out, f"rank{r}.pt") for r in range(WORLD)])
        records = read_log(ranks[0]["run_dir"])
        reference = one_process_over_both_ranks(tempfile.mkdtemp(prefix="mxscope-dist-one-"), layer_groups=2)
        groups = [{r["layer"] for r in records if r["type"] == "layerStats" and r["step"] == step} for step in (0, 5)]
        self.assertTrue(groups[0] and groups[1] and not groups[0] & groups[1], f"two disjoint groups, got {groups}")
        assert_same_wgrad_errors(self, records, reference, expected=5)


def own_wgrad_vectors(rank, seqs, micro_batches, emulated=False):
    """Rank `rank`'s own Wgrad sum vectors, from one process on its tokens alone: {step: ({layer:
    vector}, has_prev)} as WgradErrors.records_vector hands them over."""
    captured = {}
    records_vector = wgrad_error.WgradErrors.records_vector

    def capture(errors, layers):
        present, vector = records_vector(errors, layers)
        if vector is not None:
            captured[errors.step] = (dict(zip(present, vector.reshape(len(present), -1).clone())), errors.has_prev)
        return present, vector
    with mock.patch.object(wgrad_error.WgradErrors, "records_vector", capture):
        one_process_over_both_ranks(tempfile.mkdtemp(prefix="mxscope-dist-own-"), seqs, micro_batches, ranks=(rank,), emulated=emulated)
    return captured


def mean_of_own_errors(own):
    """{(step, layer): the Wgrad error record of the mean of both ranks' own vectors} (own_wgrad_vectors of each rank)."""
    return {(step, layer): wgrad_error.wgrad_record(((vectors[layer] + own[1][step][0][layer]) / WORLD).tolist(), 16, has_prev)
            for step, (vectors, has_prev) in own[0].items() for layer in vectors}


class DataParallelPerRank(unittest.TestCase):
    """wgrad_error_scope "rank": each rank's own Wgrad error, reduced nowhere in backward (so the
    backward worker runs the observing work), the ranks' sums and sketches averaged at end_step."""
    SEQS, MICRO_BATCHES, EMULATED = (16, 16), 1, False

    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="mxscope-dist-rank-")
        options = (cls.SEQS, None, cls.MICRO_BATCHES, 1, "rank", cls.EMULATED)  # seqs, chunk_bytes, micro_batches, layer_groups, scope, emulated
        cls.ranks = run_ranks(worker, (free_port(), cls.out, *options), [os.path.join(cls.out, f"rank{r}.pt") for r in range(WORLD)])
        cls.records = read_log(cls.ranks[0]["run_dir"])

    def test_the_backward_worker_runs_the_observing_work_on_every_rank(self):
        self.assertEqual([(rank["worker"], rank["worker ran"]) for rank in self.ranks], [(True, True)] * WORLD)

    def test_runstarted_carries_the_scope(self):
        started = next(r for r in self.records if r["type"] == "runStarted")
        self.assertEqual(started["config"]["wgradErrorScope"], "rank")

    def test_histograms_are_still_the_sum_of_the_ranks(self):
        published = {(r["step"], r["layer"], r["gemm"], o["operand"]): o["histogram"] for r in self.records if r["type"] == "layerStats" for o in r["operands"]}
        keys, vectors0 = self.ranks[0]["local"][5]
        vectors1 = self.ranks[1]["local"][5][1]
        for row, key in enumerate(keys):
            self.assertEqual(published[(5, *key)], stats.operand_stats(key[2], (vectors0[row] + vectors1[row]).tolist())["histogram"], key)

    def test_wgrad_error_is_the_record_of_the_mean_of_each_ranks_own_sums(self):
        own = [own_wgrad_vectors(rank, self.SEQS, self.MICRO_BATCHES, self.EMULATED) for rank in range(WORLD)]
        got = wgrad_errors(self.records)
        self.assertEqual(len(got), 2 * 5)
        for step, (vectors, has_prev) in own[0].items():
            self.assertEqual(has_prev, step == 5, "the step before kept each rank's own E")
            for layer, vector in vectors.items():
                self.assertFalse(torch.equal(vector, own[1][step][0][layer]), "ranks saw different data")
        assert_errors_close(self, got, mean_of_own_errors(own), relative=1e-9, list_relative=1e-7)


class DataParallelPerRankOtherTokensMicroBatches(DataParallelPerRank):
    """The same with two backward passes per step (E and ∇W summed over them first) and ranks of
    other token counts (whose chunks of E need not agree: nothing is reduced chunk by chunk)."""
    SEQS, MICRO_BATCHES = (16, 40), 2


class DataParallelPerRankEmulated(DataParallelPerRank):
    """The same with every layer emulated in MXFP4: the Wgrad error comes from the emulated GEMMs
    (in autograd's backward, not the hooks), and is still each rank's own."""
    EMULATED = True

    def test_the_backward_worker_runs_the_observing_work_on_every_rank(self):
        # Emulated layers measure inside their own backward: nothing is queued for the worker.
        self.assertEqual([rank["worker"] for rank in self.ranks], [True] * WORLD)


def scope_switch_worker(rank, port, out_dir):
    """One bridge, three runs: wgradErrorScope rank, batch, rank again (as a script's runs loop could
    start them); per run, whether the backward worker took the observing work, and the run's dir."""
    join_gloo(rank, port)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(TinyNet())
    bridge = bridge_for(model, out_dir, wgrad_error_scope="rank")
    runs = []
    for scope in ("rank", "batch", "rank"):
        bridge.start_run(config=dict(bridge.config, wgradErrorScope=scope))
        worker = bridge.backward_worker
        generator = torch.Generator().manual_seed(100 + rank)
        for step in range(STEPS):
            bridge.begin_step(step)
            model(torch.randn(4, 16, 64, generator=generator).requires_grad_()).pow(2).mean().backward()
            bridge.end_step(loss=1.0)
            model.zero_grad()
        runs.append({"scope": scope, "worker": worker is not None, "run_dir": bridge.run_dir})
        bridge.end_run()
    bridge.close()
    save_result(runs, rank_result(out_dir, rank))
    end_rank()


class ScopeSwitch(unittest.TestCase):
    def test_runs_of_either_scope_follow_each_other_in_one_bridge(self):
        ranks = in_ranks(scope_switch_worker, "mxscope-dist-switch-")
        self.assertEqual([[(run["scope"], run["worker"]) for run in rank] for rank in ranks],
                         [[("rank", True), ("batch", False), ("rank", True)]] * WORLD, "the worker for the per-rank runs alone")
        batch = one_process_over_both_ranks(tempfile.mkdtemp(prefix="mxscope-dist-one-"))
        own = [own_wgrad_vectors(rank, (16, 16), 1) for rank in range(WORLD)]
        for run in ranks[0]:
            records = read_log(run["run_dir"])
            self.assertEqual(next(r for r in records if r["type"] == "runStarted")["config"].get("wgradErrorScope"), run["scope"])
            self.assertEqual(records[-1]["status"], "completed")
            if run["scope"] == "batch":
                assert_same_wgrad_errors(self, records, batch)
                continue
            got, want = wgrad_errors(records), mean_of_own_errors(own)
            assert_errors_close(self, got, want, relative=1e-9, list_relative=1e-7)
            for key, error in want.items():  # relative to the norm itself, however small
                self.assertAlmostEqual(got[key]["errNorm"], error["errNorm"], delta=1e-9 * error["errNorm"], msg=f"{key} errNorm")


def parts_of_chunks(rank, port, out_dir):
    """wgrad_error.mean_parts on two chunks of 7 elements (as ∇Ŵ and ∇W) and one of 2 × 3, each
    rank's values its own."""
    join_gloo(rank, port)
    seven = torch.arange(7, dtype=torch.float32) * (rank + 1)
    odd, odd_where = wgrad_error.mean_parts((seven, seven + 1), WORLD, None)
    (even,), even_where = wgrad_error.mean_parts((torch.full((2, 3), float(rank + 1)),), WORLD, None)
    save_result({"odd": [p.clone() for p in odd], "odd_where": odd_where, "even": even.clone(), "even_where": even_where},
                rank_result(out_dir, rank))
    end_rank()


class MeanParts(unittest.TestCase):
    def test_each_rank_gets_its_part_of_the_mean_the_last_one_padded_with_zeros(self):
        first, second = in_ranks(parts_of_chunks, "mxscope-dist-parts-")
        self.assertEqual((first["odd_where"], second["odd_where"]), ((0, 4), (4, 8)))  # ⌈7 / 2⌉ = 4
        mean = torch.arange(7, dtype=torch.float32) * 1.5  # (1 + 2) / 2
        for shift, (a, b) in enumerate(zip(first["odd"], second["odd"])):
            self.assertTrue(torch.equal(a, mean[:4] + shift))
            self.assertTrue(torch.equal(b, torch.cat([mean[4:] + shift, torch.zeros(1)])), "the padding is zeros, not the mean of ones")
        self.assertEqual((first["even_where"], second["even_where"]), ((0, 3), (3, 6)))
        for rank in (first, second):
            self.assertTrue(torch.equal(rank["even"], torch.full((3,), 1.5)))


def refuse_backward_thread(rank, port, out_dir):
    join_gloo(rank, port)
    model = torch.nn.parallel.DistributedDataParallel(TinyNet())
    try:
        bridge_for(model, out_dir, backward_thread=True)
        refused = None
    except ValueError as error:
        refused = str(error)
    save_result(refused, rank_result(out_dir, rank))
    end_rank()


class BackwardThreadRefused(unittest.TestCase):
    def test_a_worker_thread_is_refused_under_torch_distributed(self):
        # Its collectives beside the trainer's hung DDP and FSDP2 on two GPUs.
        for refused in in_ranks(refuse_backward_thread, "mxscope-dist-thread-"):
            self.assertIsNotNone(refused, "Bridge(backward_thread=True) was accepted")
            self.assertIn("backward_thread=True under torch.distributed", refused)
            self.assertIn("leave backward_thread unset", refused)


if __name__ == "__main__":
    unittest.main()
