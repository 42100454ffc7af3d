/** Input checks shared by every block-scaled format: values are rows of `rowLength` along the last axis. */

export const MX_BLOCK_SIZE = 32;

/** Throws an Error naming the bad parameter; returns the number of rows. */
export function checkRows(length: number, rowLength: number, caller: string): number {
  if (!Number.isInteger(rowLength) || rowLength <= 0) {
    throw new Error(`${caller}: rowLength must be a positive integer, got ${rowLength}`);
  }
  if (length === 0) throw new Error(`${caller}: values is empty; pass at least one row`);
  if (length % rowLength !== 0) {
    throw new Error(
      `${caller}: values.length ${length} is not a multiple of rowLength ${rowLength}; pass whole rows`,
    );
  }
  return length / rowLength;
}

export function blocksPerRow(rowLength: number): number {
  return Math.ceil(rowLength / MX_BLOCK_SIZE);
}
