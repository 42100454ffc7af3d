"""A Wgrad error record's sketches are formatted once, with their JSON text kept for `runlog.compact`:
the entries are those the per-entry formatting gave (9 significant digits, non-finite ones sent as 0,
signed zeros kept) and the line parses to what encoding the plain record gives."""
import json
import math
import random
import struct
import unittest

from mxscope_bridge import stats
from mxscope_bridge.runlog import EncodedList, compact


def per_entry(values):
    """The sketch entries as they were formatted one at a time before."""
    return [float(f"{s:.9g}") if math.isfinite(s) else 0.0 for s in values]


def float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def entries(seed: int, count: int):
    generator = random.Random(seed)
    special = [0.0, -0.0, 3.0, -7.0, 1e-45, -1.4e-45, 3.4e38, 1e9, 123456789.0, 1e-5, 2.5e-7, float("nan"), float("inf"), float("-inf")]
    return [generator.choice(special) if generator.random() < 0.3 else float32(generator.gauss(0, 10 ** generator.randint(-12, 12)))
            for _ in range(count)]


def plain(record):
    """The record with its sketches as plain lists (what json.dumps encodes entry by entry)."""
    error = dict(record["wgradError"], sketch=list(record["wgradError"]["sketch"]))
    if error["sketchPrev"] is not None:
        error["sketchPrev"] = list(error["sketchPrev"])
    return {**record, "wgradError": error}


def record(error):
    return {"type": "layerStats", "runId": "r", "step": 10, "layer": "l", "gemm": "wgrad", "precision": "mxfp4",
            "operands": [{"operand": "dy", "histogram": {"counts": [1, 2]}}], "wgradError": error}


class EncodedSketches(unittest.TestCase):
    def test_entries_are_the_per_entry_formatting(self):
        for seed in range(40):
            k = random.Random(seed).choice([0, 1, 16, 64])
            vector = [4.0, 1.0, 0.5, 2.0, 0.25] + entries(seed, 2 * k)
            for has_prev in (True, False):
                error = stats.wgrad_error(vector, k, has_prev)
                sums = 5 if has_prev else 3
                want = per_entry(vector[sums:sums + k])
                self.assertIsInstance(error["sketch"], EncodedList)
                self.assertEqual(error["sketch"], want)
                self.assertEqual([math.copysign(1, s) for s in error["sketch"]], [math.copysign(1, s) for s in want], "signed zeros kept")
                self.assertTrue(all(type(s) is float for s in error["sketch"]))
                if has_prev:
                    self.assertEqual(error["sketchPrev"], per_entry(vector[sums + k:sums + 2 * k]))
                else:
                    self.assertIsNone(error["sketchPrev"])

    def test_the_line_parses_to_the_plain_record(self):
        for seed in range(40):
            k = random.Random(seed).choice([0, 1, 16, 64])
            for has_prev in (True, False):
                r = record(stats.wgrad_error([4.0, 1.0, 0.5, 2.0, 0.25] + entries(seed, 2 * k), k, has_prev))
                line = compact(r)
                self.assertNotIn("\n", line)
                self.assertEqual(json.loads(line), json.loads(compact(plain(r))))
                self.assertEqual(list(json.loads(line)), list(r), "fields in the record's order")
                self.assertEqual(list(json.loads(line)["wgradError"]), list(r["wgradError"]))
                parsed = json.loads(line, parse_int=float)["wgradError"]["sketch"]  # "-0" is an int to Python, -0 to JavaScript
                self.assertEqual([math.copysign(1, s) for s in parsed], [math.copysign(1, s) for s in r["wgradError"]["sketch"]])

    def test_other_records_are_encoded_as_they_are(self):
        error = stats.wgrad_error([4.0, 1.0, 0.5] + entries(7, 8), 8, False)
        moved = {**record(error), "simulated": True}  # wgradError no longer last: encoded entry by entry, nothing moves
        self.assertEqual(compact(moved), json.dumps(plain(moved), separators=(",", ":"), ensure_ascii=False, allow_nan=False))
        for other in ({"type": "step", "step": 1, "loss": 2.5}, record({"sketch": [1.5], "sketchPrev": None}), record(None)):
            self.assertEqual(compact(other), json.dumps(other, separators=(",", ":"), ensure_ascii=False, allow_nan=False))

    def test_a_non_finite_field_beside_encoded_sketches_is_still_refused(self):
        error = dict(stats.wgrad_error([4.0, 1.0, 0.5] + entries(3, 8), 8, False), relErr=float("nan"))
        with self.assertRaises(ValueError):
            compact(record(error))


if __name__ == "__main__":
    unittest.main()
