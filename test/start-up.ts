// The unit-test process's start-up, as mxscope-train's main does for the trainer: select the
// WebAssembly kernels once (src/mx installs none on import). scripts/run-tests.mjs imports this
// into every test process; a test file run on its own without it uses the TypeScript kernels, which
// give the same bits, only slower.
import { setMxBackend } from '../src/mx/backend.js';

setMxBackend('auto');
