"""The run loop the extension drives: runs() waits for Start, applies the run config (also to layers
emulated after the bridge attached), ends runs by how the script left them, and a startRun sent the
moment runEnded arrives succeeds."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

import torch

from mxscope_bridge import Bridge, default_gemms, emulate, gemm_config, run_config

from tests.helpers import TinyNet, read_log
from tests.wsclient import Client

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exit_fixture.py")
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def serve_runs(bridge, model, max_runs, on_run=lambda run: None):
    """A training script driven by a client: `max_runs` runs of `bridge.runs()` on TinyNet, SGD, one
    synthetic batch a step; `on_run(run)` sees each run as it starts. Returns the started thread."""
    def script():
        with bridge:
            for run in bridge.runs(max_runs=max_runs, idle_timeout=60):
                on_run(run)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                for _ in run.steps():
                    model(torch.randn(2, 16, 64)).pow(2).mean().backward()
                    run.end_step(loss=1.0)
                    optimizer.step()
                    optimizer.zero_grad()
    thread = threading.Thread(target=script)
    thread.start()
    return thread



class RunLoop(unittest.TestCase):
    def test_runs_switch_configs_and_start_right_after_run_ended(self):
        torch.manual_seed(0)
        model = TinyNet()
        config = run_config(steps=4, stats_every=2, tokens_per_step=64, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32)))
        bridge = Bridge(model, config, out_dir=tempfile.mkdtemp(), port=0, print_listening=False, handle_exit=False)
        emulation = emulate(model, default_gemms(gemm_config("fp32")))  # after Bridge(): no order trap
        seen = []

        def on_run(run):
            run.reset(model)
            seen.append((run.seed, emulation.gemms["wgrad"]["rotation"], emulation.gemms["wgrad"]["precision"]))
        thread = serve_runs(bridge, model, 4, on_run)
        client = Client(bridge.server.connect_url)
        self.addCleanup(client.close)
        client.recv()
        client.send({"type": "subscribe", "id": "s"})
        rotations = ["hadamard", "none", "random-hadamard", "none"]
        for i, rotation in enumerate(rotations):
            client.send({"type": "setNextRunConfig", "id": f"c{i}", "change": {"gemms": {"wgrad": {"rotation": rotation}}, "seed": i}})
            client.send({"type": "startRun", "id": f"r{i}"})  # the moment the previous runEnded arrived
            messages = client.recv_until(lambda m: m.get("type") == "runEnded")
            replies = {m["id"]: m for m in messages if m.get("id") in (f"c{i}", f"r{i}")}
            self.assertEqual(replies[f"r{i}"]["type"], "ack", replies[f"r{i}"])
            started = next(m for m in messages if m.get("type") == "runStarted")
            self.assertEqual(started["config"]["gemms"]["wgrad"]["rotation"], rotation)
            self.assertEqual(messages[-1]["status"], "completed")
            stats = [m for m in messages if m.get("type") == "layerStats"]
            self.assertTrue(stats and all(m["precision"] == "mxfp4" and "simulated" not in m for m in stats), "the emulated GEMMs report")
        thread.join(30)
        self.assertFalse(thread.is_alive())
        self.assertEqual(seen, [(i, r, "mxfp4") for i, r in enumerate(rotations)], "the emulation ran each run's config")
        with self.assertRaisesRegex(EOFError, "closed with 1001"):
            client.recv_until(lambda m: False)

    def two_runs_served(self):
        """A bridge serving two runs of 4 steps at statsEvery 2 (TinyNet, MXFP4 H32) and a subscribed client."""
        torch.manual_seed(0)
        model = TinyNet()
        config = run_config(steps=4, stats_every=2, tokens_per_step=64, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32)))
        bridge = Bridge(model, config, out_dir=tempfile.mkdtemp(), port=0, print_listening=False, handle_exit=False)
        thread = serve_runs(bridge, model, 2)
        client = Client(bridge.server.connect_url)
        self.addCleanup(client.close)
        client.recv()
        client.send({"type": "subscribe", "id": "s"})
        return thread, client

    def test_lag1_switches_off_and_on_between_runs_from_the_editor(self):
        """Protocol 1.8: setNextRunConfig sets wgradErrorLag1 for the next run (the picker's "Every
        layer, no lag-1"): that run keeps no E_{t−1} and reports lag1Cos null; true turns it on again."""
        thread, client = self.two_runs_served()
        client.send({"type": "setNextRunConfig", "id": "bad", "change": {"wgradErrorLag1": "off"}})
        self.assertIn("change.wgradErrorLag1", client.recv_until(lambda m: m.get("id") == "bad")[-1]["message"])
        for i, lag1 in enumerate([False, True]):
            client.send({"type": "setNextRunConfig", "id": f"c{i}", "change": {"wgradErrorLag1": lag1}})
            client.send({"type": "startRun", "id": f"r{i}"})
            messages = client.recv_until(lambda m: m.get("type") == "runEnded")
            started = next(m for m in messages if m.get("type") == "runStarted")
            self.assertIs(started["config"]["wgradErrorLag1"], lag1)
            at_2 = [m["wgradError"]["lag1Cos"] for m in messages if m.get("type") == "layerStats" and m["gemm"] == "wgrad" and m["step"] == 2]
            self.assertEqual(len(at_2), 5)
            self.assertEqual(all(value is None for value in at_2), not lag1, f"wgradErrorLag1 {lag1}: {at_2}")
        thread.join(30)
        self.assertFalse(thread.is_alive())

    def test_stats_opt_ins_switch_between_runs_from_the_editor(self):
        """Protocol 1.6: setNextRunConfig sets statsLayerGroups and wgradErrorRowStride for the next run
        (what the extension's "Set Stats Cadence and Coverage" sends); the run honours them, and a
        change back to 1 gives every layer and the exact error again. A grouping the stats interval
        cannot honour is refused when asked for, naming what to change."""
        thread, client = self.two_runs_served()
        client.send({"type": "setNextRunConfig", "id": "bad", "change": {"statsEvery": 1, "statsLayerGroups": 2}})
        refused = client.recv_until(lambda m: m.get("id") == "bad")[-1]
        self.assertEqual((refused["type"], refused["code"]), ("error", "invalid-message"))
        self.assertIn("statsLayerGroups 2 needs statsEvery of at least 2 (got 1): raise statsEvery or set statsLayerGroups to 1", refused["message"])
        client.send({"type": "setNextRunConfig", "id": "zero", "change": {"wgradErrorRowStride": 0}})
        self.assertIn("change.wgradErrorRowStride", client.recv_until(lambda m: m.get("id") == "zero")[-1]["message"])
        layers_at_stats = []
        for i, (groups, stride) in enumerate([(2, 2), (1, 1)]):
            client.send({"type": "setNextRunConfig", "id": f"c{i}", "change": {"statsLayerGroups": groups, "wgradErrorRowStride": stride}})
            client.send({"type": "startRun", "id": f"r{i}"})
            messages = client.recv_until(lambda m: m.get("type") == "runEnded")
            started = next(m for m in messages if m.get("type") == "runStarted")
            self.assertEqual((started["config"].get("statsLayerGroups"), started["config"].get("wgradErrorRowStride")), (groups, stride))
            self.assertEqual(started["config"]["statsEvery"], 2, "fields the change did not name keep their value")
            stats = [m for m in messages if m.get("type") == "layerStats" and m["gemm"] == "wgrad"]
            layers_at_stats.append(sorted({(m["step"], m["layer"]) for m in stats}))
        thread.join(30)
        self.assertFalse(thread.is_alive())
        grouped, every = layers_at_stats
        self.assertEqual(len(every), 2 * 5, "every layer at each of the two stats steps")
        self.assertEqual(len(grouped), 5, "one of two layer groups at each stats step")
        self.assertEqual({layer for _, layer in grouped}, {layer for _, layer in every}, "the groups take turns: every layer once")

    def test_stop_is_acked_after_run_ended(self):
        model = TinyNet()
        # Steps paced at ~1 ms: without a model a step takes microseconds, and the loop could finish
        # every planned step before the client's stopRun arrives (then: no-active-run).
        bridge = Bridge(model, run_config(steps=10**7, stats_every=50), out_dir=None, port=0, print_listening=False, handle_exit=False)
        self.addCleanup(bridge.close)
        client = Client(bridge.server.connect_url)
        self.addCleanup(client.close)
        client.recv()
        client.send({"type": "subscribe", "id": "s"})
        client.send({"type": "startRun", "id": "r"})
        done = []

        def script():
            for run in bridge.runs(max_runs=1, idle_timeout=60):
                for _ in run.steps():
                    time.sleep(0.001)
                    run.end_step(loss=1.0)
            done.append(True)
        thread = threading.Thread(target=script)
        thread.start()
        client.recv_until(lambda m: m.get("type") == "step" and m["step"] == 3)
        client.send({"type": "stopRun", "id": "stop"})
        messages = client.recv_until(lambda m: m.get("id") == "stop")
        ended = [m for m in messages if m.get("type") == "runEnded"]
        self.assertEqual([m["status"] for m in ended], ["stopped"], "runEnded comes before the stop's ack")
        self.assertEqual(messages[-1]["type"], "ack")
        thread.join(10)
        self.assertEqual(done, [True])


class ClosingWithoutEndRun(unittest.TestCase):
    def test_close_after_the_planned_steps_completes_the_run_and_before_them_stops_it(self):
        for steps, want in ((3, ("completed", "trained 3 steps")), (2, ("stopped", "bridge closed"))):
            model = TinyNet()
            bridge = Bridge(model, run_config(steps=3, stats_every=5), out_dir=tempfile.mkdtemp(), port=0, print_listening=False, handle_exit=False)
            bridge.start_run()
            for step in range(steps):
                bridge.begin_step(step)
                model(torch.randn(2, 4, 64)).sum().backward()
                bridge.end_step(loss=1.0)
            run_dir = bridge.run_dir
            bridge.close()
            ended = read_log(run_dir)[-1]
            self.assertEqual((ended["type"], ended["status"], ended["reason"]), ("runEnded", *want))


class RememberedUrl(unittest.TestCase):
    def test_a_restarted_bridge_on_the_default_port_keeps_its_token(self):
        home = tempfile.mkdtemp(prefix="mxscope-home-")
        with mock.patch.dict(os.environ, {"MXSCOPE_HOME": home, "MXSCOPE_TOKEN": ""}):
            tokens = []
            for _ in range(2):  # the script restarting
                bridge = Bridge(TinyNet(), out_dir=None, print_listening=False, handle_exit=False)  # port 7340 (or a free one if taken)
                tokens.append(bridge.server.token)
                bridge.close()
            other = Bridge(TinyNet(), out_dir=None, port=0, print_listening=False, handle_exit=False)
            other.close()
        self.assertEqual(tokens[0], tokens[1])
        self.assertGreaterEqual(len(tokens[0]), 24)
        self.assertNotEqual(other.server.token, tokens[0], "a bridge on another port gets its own token")
        path = os.path.join(home, "bridge-token")
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)


class LeavingARun(unittest.TestCase):
    def ended(self, mode):
        out = tempfile.mkdtemp(prefix="mxscope-exit-")
        done = subprocess.run([sys.executable, FIXTURE, mode, out], capture_output=True, text=True, timeout=120)
        run_dir = done.stdout.splitlines()[0]
        records = read_log(run_dir)
        self.assertEqual([r["type"] for r in records].count("runEnded"), 1, done.stderr[-2000:])
        self.assertEqual(records[-1]["type"], "runEnded")
        return done, records[-1]

    def test_break_exception_interrupt_and_sigterm_each_end_the_run(self):
        want = {
            "break": ("stopped", "the script left the run loop", 0),
            "raise": ("failed", "ValueError: boom at step 2", 1),
            "raise-no-with": ("failed", "ValueError: boom at step 2", 1),
            "interrupt": ("stopped", "interrupted (KeyboardInterrupt) at step 2", -2),  # Python exits by SIGINT
            "sigterm": ("stopped", "the process exited (SystemExit 143) at step 2", 143),
        }
        for mode, (status, reason, code) in want.items():
            done, ended = self.ended(mode)
            self.assertEqual((ended["status"], ended["reason"], ended["step"]), (status, reason, 2), mode)
            self.assertEqual(done.returncode, code, (mode, done.stderr[-2000:]))


class CtrlCExitStatus(unittest.TestCase):
    """An uncaught KeyboardInterrupt ends the process by SIGINT although an exit handler registered
    after the bridge's import evaluates a string (what torch._dynamo's did on torch 2.11 and Python
    3.12: the script exited with status 1); a script that catches it exits as it chooses."""

    def exit_status(self, body: str, import_bridge: bool = True) -> int:
        script = "\n".join(["import atexit, sys", f"sys.path.insert(0, {PYTHON_DIR!r})",
                              "import mxscope_bridge" if import_bridge else "",
                              "atexit.register(lambda: exec('1'))", body])
        return subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120).returncode

    def test_an_uncaught_ctrl_c_exits_by_sigint(self):
        self.assertEqual(self.exit_status("raise KeyboardInterrupt", import_bridge=False), 1, "the exit handler no longer clears CPython's note")
        self.assertEqual(self.exit_status("raise KeyboardInterrupt"), -signal.SIGINT)

    def test_a_caught_ctrl_c_or_another_error_exits_as_the_script_says(self):
        self.assertEqual(self.exit_status("try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt:\n    sys.exit(3)"), 3)
        self.assertEqual(self.exit_status("raise ValueError('boom')"), 1)
        self.assertEqual(self.exit_status("pass"), 0)

    def test_a_ctrl_c_that_a_shell_showed_and_went_on_from_is_not_the_exit(self):
        # A notebook kernel (IPython) keeps the last exception it showed, a KeyboardInterrupt of an
        # interrupted cell, in sys.last_value; the kernel then exits normally.
        shell = ("def show(code):\n    try:\n        exec(code, {})\n    except KeyboardInterrupt as error:\n"
                 "        sys.last_type, sys.last_value, sys.last_traceback = type(error), error, error.__traceback__\n"
                 "        sys.last_exc = error\n")
        self.assertEqual(self.exit_status(f"exec({shell!r}, {{'__name__': 'a_shell', 'sys': sys}}, namespace := {{}})\n"
                                          "namespace['show']('raise KeyboardInterrupt')"), 0)


if __name__ == "__main__":
    unittest.main()
