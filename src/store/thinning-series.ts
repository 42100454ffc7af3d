// A bounded history that covers a whole run: when it is full, every other entry is dropped and
// from then on only every 2nd (then 4th, 8th…) arrival is kept. Memory stays at most `capacity`
// entries however long the run, the kept points stay evenly spread from the first to the newest,
// and two runs fed the same steps keep the same steps (so they can be compared step for step).

export class ThinningSeries<T> {
  private items: T[] = [];
  private stride = 1;
  private arrivals = 0;
  private newest: T | undefined;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 2) throw new RangeError(`ThinningSeries capacity must be an integer ≥ 2, got ${capacity}`);
  }

  push(item: T): void {
    this.newest = item;
    if (this.arrivals++ % this.stride !== 0) return;
    this.items.push(item);
    if (this.items.length > this.capacity) {
      this.items = this.items.filter((_, i) => i % 2 === 0);
      this.stride *= 2;
    }
  }

  /** The kept entries, oldest first, always ending with the newest one pushed. */
  values(): readonly T[] {
    const last = this.items[this.items.length - 1];
    return this.newest === undefined || last === this.newest ? this.items : [...this.items, this.newest];
  }

  get latest(): T | undefined {
    return this.newest;
  }

  /** How many arrivals one kept entry stands for now (1 until the first thinning). */
  get keepEvery(): number {
    return this.stride;
  }

  get pushed(): number {
    return this.arrivals;
  }
}
