// The JSON examples of docs/protocol.md: what publisher authors work from, so every one is a case of
// the conformance corpus and must validate.
import { readFileSync } from 'node:fs';

/** The JSON objects in the ```json blocks of the doc (a block may hold several, one after another). */
export function protocolDocExamples(doc = readFileSync('docs/protocol.md', 'utf8')): Record<string, unknown>[] {
  const found: Record<string, unknown>[] = [];
  for (const [, block] of doc.matchAll(/```json\n([\s\S]*?)```/g)) {
    let depth = 0;
    let start = -1;
    let inString = false;
    for (let i = 0; i < block!.length; i++) {
      const c = block![i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{' && depth++ === 0) start = i;
      else if (c === '}' && --depth === 0) found.push(JSON.parse(block!.slice(start, i + 1)) as Record<string, unknown>);
    }
  }
  return found;
}

/** Server messages carry `seq`; client messages do not. */
export function isServerExample(message: Record<string, unknown>): boolean {
  return 'seq' in message;
}
