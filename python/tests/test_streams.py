"""on_stream makes a stream current as `torch.cuda.stream` does, at less host cost."""
import unittest

import torch

from mxscope_bridge.streams import on_stream


@unittest.skipUnless(torch.cuda.is_available(), "CUDA streams")
class OnStream(unittest.TestCase):
    def test_kernels_inside_go_to_the_stream_and_the_streams_before_are_current_after(self):
        before = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        x = torch.zeros(1 << 20, device="cuda")
        with on_stream(side) as current:
            self.assertEqual(current, side)
            self.assertEqual(torch.cuda.current_stream(), side)
            torch.cuda._sleep(200_000_000)
            x.fill_(2.0)  # behind the sleep on the side stream
        self.assertEqual(torch.cuda.current_stream(), before)
        self.assertEqual(x.sum().item(), 0.0, "the fill ran on the side stream, still sleeping, not on the one before")
        before.wait_stream(side)
        self.assertEqual(x.sum().item(), 2.0 * (1 << 20))

    def test_the_stream_before_is_current_again_after_an_error(self):
        before = torch.cuda.current_stream()
        with self.assertRaises(KeyError):
            with on_stream(torch.cuda.Stream()):
                raise KeyError("inside")
        self.assertEqual(torch.cuda.current_stream(), before)
        self.assertEqual(torch.cuda.current_device(), before.device_index)

    @unittest.skipUnless(torch.cuda.device_count() > 1, "a second GPU")
    def test_a_stream_of_another_device_leaves_the_current_device_as_it_was(self):
        torch.cuda.set_device(0)
        other = torch.cuda.Stream(device=1)
        with on_stream(other):
            self.assertEqual(torch.cuda.current_stream(1), other)
        self.assertEqual(torch.cuda.current_device(), 0)
        self.assertNotEqual(torch.cuda.current_stream(1), other)


if __name__ == "__main__":
    unittest.main()
