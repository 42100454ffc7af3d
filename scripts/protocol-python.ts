// `npm run protocol:python`: writes python/mxscope_bridge/protocol.json from src/protocol.
import { writeFileSync } from 'node:fs';
import { protocolJson } from '../src/protocol/python-json.js';

const PROTOCOL_JSON_PATH = 'python/mxscope_bridge/protocol.json';
writeFileSync(PROTOCOL_JSON_PATH, protocolJson());
console.log(`wrote ${PROTOCOL_JSON_PATH}`);
