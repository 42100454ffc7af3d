"""A stats step's operand records, built from all rows at once, are each row's record built alone:
histograms trimmed to their used span (interior empty bins kept), empty histograms, NaN blocks, the
E4M3 kind, and rows in any order of span."""
import random
import unittest

import torch

from mxscope_bridge import mxfp4, stats


def vectors(rows: int, seed: int) -> torch.Tensor:
    generator = random.Random(seed)
    v = torch.zeros(rows, stats.OPERAND_SCALARS + mxfp4.HIST_BINS + 1, dtype=torch.float64)
    for row in range(rows):
        v[row, :stats.OPERAND_SCALARS] = torch.tensor([generator.uniform(1, 1e6) for _ in range(stats.OPERAND_SCALARS)])
        kind = generator.choice(["empty", "one bin", "span", "edges"])
        bins = {"empty": [], "one bin": [generator.randrange(mxfp4.HIST_BINS)],
                "span": sorted(generator.sample(range(mxfp4.HIST_BINS), 3)), "edges": [0, mxfp4.HIST_BINS - 1]}[kind]
        for b in bins:
            v[row, stats.OPERAND_SCALARS + b] = generator.randrange(1, 2 ** 31)
        v[row, stats.OPERAND_SCALARS + mxfp4.NAN_BIN] = generator.choice([0, 5])
    return v


class OperandRecords(unittest.TestCase):
    def test_all_rows_at_once_equal_each_row_alone(self):
        v = vectors(200, 1)
        names = [random.Random(2).choice(["x", "w", "dy"]) for _ in range(len(v))]
        formats = [random.Random(row).choice([("mxfp4", 32), ("nvfp4", 16), ("mxfp8-e4m3", 32)]) for row in range(len(v))]
        together = stats.operand_records(names, v, formats)
        alone = [stats.operand_records([name], v[row:row + 1], [fmt])[0] for row, (name, fmt) in enumerate(zip(names, formats))]
        self.assertEqual(together, alone)
        spans = {len(r["histogram"]["counts"]) for r in together}
        self.assertTrue({0, 1, mxfp4.HIST_BINS} <= spans, spans)  # empty, one bin and the widest span were all drawn

    def test_a_histogram_keeps_its_empty_bins_inside_the_span(self):
        v = vectors(1, 3)
        v[0, stats.OPERAND_SCALARS:stats.OPERAND_SCALARS + mxfp4.HIST_BINS] = 0
        v[0, stats.OPERAND_SCALARS + 10] = 4
        v[0, stats.OPERAND_SCALARS + 13] = 7
        histogram = stats.operand_records(["x"], v)[0]["histogram"]
        self.assertEqual(histogram["counts"], [4, 0, 0, 7])
        self.assertEqual(histogram["minExp"], 10 + mxfp4.SCALE_MIN_EXP)

    def test_records_come_one_at_a_time(self):
        records = stats.iter_operand_records(["x", "w"], vectors(2, 4))
        self.assertEqual(next(records)["operand"], "x")
        self.assertEqual(next(records)["operand"], "w")
        self.assertIsNone(next(records, None))


if __name__ == "__main__":
    unittest.main()
