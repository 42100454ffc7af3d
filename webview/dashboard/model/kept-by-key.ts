// Objects kept from one update to the next by key (chart datasets, live lines): what an update
// does not ask for again is dropped after it. Chart.js keeps a dataset's elements while the dataset
// object stays the same, so a live chart reuses them instead of rebuilding thousands per frame.

export class KeptByKey<T> {
  private kept = new Map<string, T>();
  private taken = new Map<string, T>();

  /** The object kept under `key` if it still `fits`, else a new one from `make`. */
  take(key: string, make: () => T, fits: (value: T) => boolean = () => true): T {
    const found = this.taken.get(key) ?? this.kept.get(key);
    const value = found !== undefined && fits(found) ? found : make();
    this.taken.set(key, value);
    return value;
  }

  /** Ends an update: the objects taken in it, in the order first taken; the others are forgotten. */
  sweep(): T[] {
    this.kept = this.taken;
    this.taken = new Map();
    return [...this.kept.values()];
  }
}
