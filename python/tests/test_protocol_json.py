"""The bridge's protocol constants come from protocol.json (generated from src/protocol): the modules
that check and build messages use those, and describe_gemm gives the TypeScript labels."""
import unittest

from mxscope_bridge import capture, config, link, messages, precision, protocol, rotation
from mxscope_bridge.config import gemm_config


class ProtocolJson(unittest.TestCase):
    def test_modules_use_the_generated_constants(self):
        self.assertIs(precision.PRECISIONS, protocol.PRECISIONS)
        self.assertIs(rotation.ROTATIONS, protocol.ROTATIONS)
        self.assertIs(rotation.HADAMARD_BLOCKS, protocol.HADAMARD_BLOCKS)
        self.assertIs(config.GEMM_KINDS, protocol.GEMM_KINDS)
        self.assertIs(config.ROUNDINGS, protocol.ROUNDINGS)
        self.assertIs(capture.GEMM_OPERANDS, protocol.GEMM_OPERANDS)
        self.assertIs(messages.ERROR_CODES, protocol.ERROR_CODES)
        self.assertIs(link.PROTOCOL_VERSION, protocol.PROTOCOL_VERSION)
        self.assertEqual(protocol.PROTOCOL_VERSION["major"], 1)
        self.assertEqual(protocol.GEMM_OPERANDS["wgrad"], ("dy", "x"))

    def test_describe_gemm_gives_the_typescript_labels(self):
        self.assertEqual(protocol.describe_gemm(gemm_config("fp8")), "fp8")
        self.assertEqual(protocol.describe_gemm(gemm_config("mxfp4")), "mxfp4")
        self.assertEqual(protocol.describe_gemm(gemm_config("mxfp4", "hadamard", 16)), "mxfp4 · H16")
        self.assertEqual(protocol.describe_gemm(gemm_config("mxfp4", "random-hadamard", 16, "stochastic", True)), "mxfp4 · RHT16+SR¾")

    def test_an_invalid_gemm_config_is_named(self):
        with self.assertRaisesRegex(ValueError, "no label for GEMM config .*mxfp3"):
            protocol.describe_gemm({**gemm_config("mxfp4"), "precision": "mxfp3"})


if __name__ == "__main__":
    unittest.main()
