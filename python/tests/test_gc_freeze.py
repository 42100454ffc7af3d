"""A run freezes the objects alive at its start out of garbage collection and thaws them at its end
(only when nothing was frozen before it); nothing is frozen when the collector is off, another
bridge's run holds the freeze, or the bridge was made with freeze_gc=False."""
import gc
import tempfile
import unittest
import weakref

from mxscope_bridge import gc_freeze

from tests.helpers import TinyNet, bridge_for, train


class FreezeForTheRun(unittest.TestCase):
    def setUp(self):
        gc.unfreeze()  # from nothing frozen (torch 2.x's imports freeze a few hundred objects)
        self.assertIsNone(gc_freeze._holding(), "a bridge of an earlier test still holds a freeze")
        self.addCleanup(gc.unfreeze)
        self.out = tempfile.mkdtemp()

    def bridge(self, **kwargs):
        model = TinyNet()
        bridge = bridge_for(model, self.out, **kwargs)
        self.addCleanup(bridge.close)
        return model, bridge

    def test_a_run_freezes_what_is_alive_at_its_start_and_thaws_it_at_its_end(self):
        model, bridge = self.bridge()
        alive = []  # tracked by the collector (a bare object() is not, and would prove nothing)
        threshold = gc.get_threshold()
        gc.set_threshold(10 ** 9)  # no automatic collection meanwhile
        self.addCleanup(gc.set_threshold, *threshold)
        garbage = TinyNet()
        garbage.me = [garbage]  # a cycle: collected before the freeze, not frozen with it
        gone = weakref.ref(garbage)
        del garbage
        bridge.start_run()
        self.assertIsNone(gone(), "cyclic garbage is collected, not frozen")
        self.assertGreater(gc.get_freeze_count(), 1000)
        self.assertFalse(any(o is alive for o in gc.get_objects()), "frozen objects are out of every generation")
        train(model, bridge, 6)  # stats steps run with the freeze
        bridge.end_run()
        self.assertEqual(gc.get_freeze_count(), 0)
        self.assertTrue(any(o is alive for o in gc.get_objects()), "thawed: back in a generation")

    def test_with_objects_frozen_before_the_run_it_freezes_and_leaves_every_freeze_in_place(self):
        # torch's import path froze a few hundred objects in the GPU machines' processes; a trainer may freeze its own.
        _, bridge = self.bridge()
        gc.freeze()
        frozen = gc.get_freeze_count()
        made_since = [[] for _ in range(1000)]
        bridge.start_run()
        self.assertGreaterEqual(gc.get_freeze_count(), frozen + 1000, "the run froze what was made since")
        bridge.end_run()
        self.assertGreaterEqual(gc.get_freeze_count(), frozen + 1000, "nothing thawed: CPython cannot thaw only the run's part")
        self.assertFalse(any(o is made_since[0] for o in gc.get_objects()))

    def test_freeze_gc_false_and_a_disabled_collector_freeze_nothing(self):
        _, bridge = self.bridge(freeze_gc=False)
        bridge.start_run()
        self.assertEqual(gc.get_freeze_count(), 0)
        bridge.end_run()
        _, second = self.bridge()
        gc.disable()
        self.addCleanup(gc.enable)
        second.start_run()
        self.assertEqual(gc.get_freeze_count(), 0)
        second.end_run()

    def test_two_bridges_one_freeze_thawed_by_the_run_that_made_it(self):
        _, first = self.bridge()
        _, second = self.bridge()
        first.start_run()
        frozen = gc.get_freeze_count()
        made_since = [[] for _ in range(1000)]  # a second freeze would take these too
        second.start_run()
        self.assertLess(gc.get_freeze_count(), frozen + 1000, "the second run does not freeze again")
        second.end_run()
        self.assertGreater(gc.get_freeze_count(), frozen - 100, "nor thaw the first run's freeze")
        del made_since
        first.close()
        self.assertEqual(gc.get_freeze_count(), 0, "closing the bridge ends its run and thaws")
        self.assertIsNone(gc_freeze._holding())


if __name__ == "__main__":
    unittest.main()
