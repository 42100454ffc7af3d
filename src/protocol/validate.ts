// Runtime validation for everything that crosses a boundary (ws frames, run logs, webview
// messages). Schemas are plain functions so the hot path (20k+ records/s) stays allocation-light;
// each one names the exact path that was wrong, so an error can tell the sender what to fix.

export class ValidationError extends Error {
  constructor(
    readonly path: string,
    readonly expected: string,
    readonly got: unknown,
  ) {
    super(`${path || '(root)'}: expected ${expected}, got ${describe(got)}`);
    this.name = 'ValidationError';
  }
}

export type Schema<T> = (value: unknown, path: string) => T;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

/** Validate `value` against `schema`; throws ValidationError naming the offending path. */
export function check<T>(schema: Schema<T>, value: unknown, path = ''): T {
  return schema(value, path);
}

/** Like `check`, but returns the error instead of throwing (for boundaries that must not throw). */
export function tryCheck<T>(schema: Schema<T>, value: unknown): { ok: true; value: T } | { ok: false; error: ValidationError } {
  try {
    return { ok: true, value: schema(value, '') };
  } catch (error) {
    if (error instanceof ValidationError) return { ok: false, error };
    throw error;
  }
}

const TEST = Symbol('test');
/** A schema of one number also carries its test as a plain predicate (see arrayOf). */
type NumberSchema = Schema<number> & { [TEST]: (v: unknown) => boolean };

function numberSchema(test: (v: unknown) => boolean, expected: string): NumberSchema {
  const schema = ((v: unknown, p: string) => {
    if (!test(v)) throw new ValidationError(p, expected, v);
    return v as number;
  }) as NumberSchema;
  schema[TEST] = test;
  return schema;
}

export const num = numberSchema((v) => typeof v === 'number' && Number.isFinite(v), 'a finite number');

export const int = numberSchema((v) => typeof v === 'number' && Number.isInteger(v), 'an integer');

export function intIn(min: number, max: number): Schema<number> {
  return numberSchema((v) => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max, `an integer in [${min}, ${max}]`);
}

export const nonNegInt = intIn(0, Number.MAX_SAFE_INTEGER);

export function numIn(min: number, max: number): Schema<number> {
  return numberSchema((v) => typeof v === 'number' && v >= min && v <= max, `a number in [${min}, ${max}]`);
}

export function str(maxLength = 4096): Schema<string> {
  return (v, p) => {
    if (typeof v !== 'string') throw new ValidationError(p, 'a string', v);
    if (v.length > maxLength) throw new ValidationError(p, `a string of at most ${maxLength} characters`, v);
    return v;
  };
}

export const bool: Schema<boolean> = (v, p) => {
  if (typeof v !== 'boolean') throw new ValidationError(p, 'a boolean', v);
  return v;
};

export function literal<const T extends readonly (string | number | boolean)[]>(...allowed: T): Schema<T[number]> {
  const expected = `one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`;
  return (v, p) => {
    if (!allowed.includes(v as T[number])) throw new ValidationError(p, expected, v);
    return v as T[number];
  };
}

export function nullable<T>(schema: Schema<T>): Schema<T | null> {
  return (v, p) => (v === null ? null : schema(v, p));
}

export function arrayOf<T>(item: Schema<T>, maxLength: number): Schema<T[]> {
  // Histograms and sketches are long arrays of numbers: test them in a tight loop and build an
  // item's path only for the item that fails (the schema then throws with it).
  const test = (item as Partial<NumberSchema>)[TEST];
  return (v, p) => {
    if (!Array.isArray(v)) throw new ValidationError(p, 'an array', v);
    if (v.length > maxLength) throw new ValidationError(p, `an array of at most ${maxLength} items`, v);
    if (test) {
      for (let i = 0; i < v.length; i++) if (!test(v[i])) item(v[i], `${p}[${i}]`);
    } else {
      for (let i = 0; i < v.length; i++) item(v[i], `${p}[${i}]`);
    }
    return v as T[];
  };
}

/** A record with string keys and values of one schema (e.g. free-form model settings). */
export function recordOf<T>(value: Schema<T>, maxKeys: number): Schema<Record<string, T>> {
  return (v, p) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(p, 'an object', v);
    const keys = Object.keys(v);
    if (keys.length > maxKeys) throw new ValidationError(p, `an object of at most ${maxKeys} keys`, v);
    for (const key of keys) value((v as Record<string, unknown>)[key], `${p}.${key}`);
    return v as Record<string, T>;
  };
}

type Shape<T> = { [K in keyof T]-?: Schema<T[K]> };
const OPTIONAL = Symbol('optional');
type OptionalSchema<T> = Schema<T | undefined> & { [OPTIONAL]: true };

/** Marks a field of `object({...})` as optional: absent (or undefined) passes. */
export function optional<T>(schema: Schema<T>): OptionalSchema<T> {
  const wrapped = ((v: unknown, p: string) => (v === undefined ? undefined : schema(v, p))) as OptionalSchema<T>;
  wrapped[OPTIONAL] = true;
  return wrapped;
}

/** A Float64Array (webview messages carry them as bytes) of at most `maxLength` values; any value, NaN included. */
export function float64Array(maxLength: number): Schema<Float64Array> {
  return typedArray(Float64Array, maxLength);
}

/** A Uint32Array of at most `maxLength` values. */
export function uint32Array(maxLength: number): Schema<Uint32Array> {
  return typedArray(Uint32Array, maxLength);
}

function typedArray<T extends Float64Array | Uint32Array>(type: { new (length: number): T; name: string }, maxLength: number): Schema<T> {
  return (v, p) => {
    if (!(v instanceof type)) throw new ValidationError(p, `a ${type.name}`, v);
    if (v.length > maxLength) throw new ValidationError(p, `a ${type.name} of at most ${maxLength} values`, `${v.length} values`);
    return v;
  };
}

/**
 * An object with exactly the listed fields checked. Unknown extra fields are allowed and kept
 * (forward compatibility: a newer publisher may add fields an older reader ignores).
 */
export function object<T>(shape: Shape<T>): Schema<T> {
  const entries = Object.entries(shape) as [string, Schema<unknown>][];
  return (v, p) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(p, 'an object', v);
    const record = v as Record<string, unknown>;
    for (const [key, schema] of entries) {
      // Shape keys are protocol field names, never Object.prototype members, so a lookup is safe.
      const value = record[key];
      if (value === undefined && !(OPTIONAL in schema)) throw new ValidationError(`${p}.${key}`, 'a value (field is required)', undefined);
      schema(value, `${p}.${key}`);
    }
    return v as T;
  };
}

/**
 * `schema`, then `rule` over the value it accepted: for rules that relate fields to each other
 * (e.g. blocks = sum(counts) + nanBlocks). `rule` throws a ValidationError naming the field.
 */
export function refined<T>(schema: Schema<T>, rule: (value: T, path: string) => void): Schema<T> {
  return (v, p) => {
    const value = schema(v, p);
    rule(value, p);
    return value;
  };
}

/**
 * `schema` behind a predicate that accepts the common case without walking it: what `accepts`
 * takes is returned as it is; anything else goes through `schema`, which accepts it or names what
 * was wrong. `accepts` must never accept a value `schema` refuses.
 */
export function fastPath<T>(accepts: (value: unknown) => boolean, schema: Schema<T>): Schema<T> {
  return (v, p) => (accepts(v) ? (v as T) : schema(v, p));
}

const ISO_8601 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

/** An ISO 8601 date-time with a zone, as `Date.toISOString()` and Python's `isoformat()` write it. */
export const isoDateTime: Schema<string> = (v, p) => {
  if (typeof v !== 'string' || !ISO_8601.test(v)) throw new ValidationError(p, 'an ISO 8601 date-time with a zone, e.g. "2026-11-21T16:39:08.886Z"', v);
  return v;
};

/**
 * A discriminated union on `type`: picks the member schema by tag, so the error names the member
 * that failed rather than listing every alternative.
 */
export function union<T extends { type: string }>(members: { [K in T['type']]: Schema<Extract<T, { type: K }>> }): Schema<T> {
  const table = members as Record<string, Schema<T>>;
  const known = Object.keys(table);
  return (v, p) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(p, 'an object with a "type" field', v);
    const tag = (v as { type?: unknown }).type;
    if (typeof tag !== 'string' || !Object.hasOwn(table, tag)) {
      throw new ValidationError(`${p}.type`, `one of ${known.join(', ')}`, tag);
    }
    return table[tag]!(v, p);
  };
}

/** True when a value's `type` is a string this union does not know (to ignore, not reject, it). */
export function hasUnknownType(value: unknown, known: readonly string[]): value is { type: string } {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string' && !known.includes((value as { type: string }).type);
}
