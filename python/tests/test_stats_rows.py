"""mx_ops.stats_row hands out rows of zeroed slabs (one zeroing per SLAB_ROWS operands on a stats step):
each row zeroed, never handed out twice, independent of the others, and per thread."""
import threading
import unittest

import torch

from mxscope_bridge import mx_ops, mxfp4_triton


class StatsRows(unittest.TestCase):
    def test_rows_are_zeroed_distinct_and_independent_across_slabs(self):
        rows = [mx_ops.stats_row("cpu") for _ in range(2 * mx_ops.SLAB_ROWS + 3)]
        self.assertTrue(all(row.shape == (mxfp4_triton.STATS_LEN,) and row.dtype == torch.float64 for row in rows))
        self.assertEqual(len({row.data_ptr() for row in rows}), len(rows), "no row handed out twice")
        for i, row in enumerate(rows):
            self.assertEqual(float(row.abs().sum()), 0.0, f"row {i} zeroed")
            row += i + 1  # a kernel adding into it
        self.assertEqual([float(row[0]) for row in rows], [i + 1.0 for i in range(len(rows))], "rows do not overlap")

    def test_every_row_is_16_byte_aligned_as_the_kernels_are_compiled_for(self):
        # Triton compiles a launch once per pointer alignment: rows at odd offsets would compile twice.
        rows = [mx_ops.stats_row("cpu") for _ in range(mx_ops.SLAB_ROWS + 2)]
        self.assertEqual([row.data_ptr() % 16 for row in rows], [0] * len(rows))

    def test_each_thread_takes_rows_from_slabs_of_its_own(self):
        main_row = mx_ops.stats_row("cpu")
        other = []
        thread = threading.Thread(target=lambda: other.append(mx_ops.stats_row("cpu")))
        thread.start()
        thread.join()
        self.assertIsNot(other[0]._base, main_row._base)


if __name__ == "__main__":
    unittest.main()
