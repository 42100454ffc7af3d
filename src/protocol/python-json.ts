// The protocol's constants and its describeGemm labels as one JSON document, written to
// python/mxscope_bridge/protocol.json (`npm run protocol:python`) so the Python bridge reads the
// TypeScript definitions instead of copying them; test/protocol/python-json.test.ts fails when the
// committed file is stale.
import { describeGemm, GEMM_KINDS, HADAMARD_BLOCKS, PRECISIONS, ROTATIONS, ROUNDINGS, WGRAD_ERROR_SCOPES, type GemmConfig } from './config.js';
import { GEMM_OPERANDS, LIMITS, OPERANDS, RUN_END_STATUSES, RUN_STATUSES, TELEMETRY_TYPES } from './telemetry.js';
import { CLIENT_MESSAGE_TYPES, ERROR_CODES, PROTOCOL_VERSION, SERVER_MESSAGE_TYPES } from './wire.js';

/** The key Python looks a GEMM config's label up by. */
export function gemmLabelKey(gemm: GemmConfig): string {
  return [gemm.precision, gemm.rotation, gemm.hadamardBlock, gemm.rounding, gemm.srPrescale].join('/');
}

/** describeGemm over every GEMM config there is (a few hundred): Python looks labels up, never recomputes them. */
function gemmLabels(): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const precision of PRECISIONS)
    for (const rotation of ROTATIONS)
      for (const hadamardBlock of HADAMARD_BLOCKS)
        for (const rounding of ROUNDINGS)
          for (const srPrescale of [false, true]) {
            const gemm: GemmConfig = { precision, rotation, hadamardBlock, rounding, srPrescale };
            labels[gemmLabelKey(gemm)] = describeGemm(gemm);
          }
  return labels;
}

export function protocolJson(): string {
  const document = {
    $comment: 'Generated from src/protocol by `npm run protocol:python`; do not edit (test/protocol/python-json.test.ts checks it is current).',
    protocolVersion: PROTOCOL_VERSION,
    gemmKinds: GEMM_KINDS,
    operands: OPERANDS,
    gemmOperands: GEMM_OPERANDS,
    precisions: PRECISIONS,
    rotations: ROTATIONS,
    hadamardBlocks: HADAMARD_BLOCKS,
    roundings: ROUNDINGS,
    wgradErrorScopes: WGRAD_ERROR_SCOPES,
    runEndStatuses: RUN_END_STATUSES,
    runStatuses: RUN_STATUSES,
    telemetryTypes: TELEMETRY_TYPES,
    clientMessageTypes: CLIENT_MESSAGE_TYPES,
    serverMessageTypes: SERVER_MESSAGE_TYPES,
    errorCodes: ERROR_CODES,
    limits: LIMITS,
    gemmLabels: gemmLabels(),
  };
  return `${JSON.stringify(document, null, 2)}\n`;
}
