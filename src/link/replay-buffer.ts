// The server's memory of recent telemetry frames, for `subscribe {from}`. Bounded by bytes: the
// oldest frames go first. Frames older than what it holds can be replayed from the run logs.
// Frames are UTF-8 Buffers, not strings: their bytes live outside the JS heap and count as external
// memory, which makes V8 collect dropped ones promptly (as strings, the dropped frames piled up in
// the old generation: a 5-minute soak's server RSS kept rising past the cap), and one Buffer is sent
// to every client without re-encoding.

const EMPTY = Buffer.alloc(0);

export class ReplayBuffer {
  private frames: Buffer[] = [];
  private head = 0;
  private bytes = 0;
  private firstSeq = 1;

  constructor(private readonly maxBytes: number) {}

  /** Append the frame with the next seq (seqs are consecutive). */
  push(frame: Buffer): void {
    this.frames.push(frame);
    this.bytes += frame.length;
    while (this.bytes > this.maxBytes && this.frames.length - this.head > 1) {
      this.bytes -= this.frames[this.head]!.length;
      this.frames[this.head++] = EMPTY;
      this.firstSeq++;
    }
    if (this.head > 4096 && this.head * 2 > this.frames.length) {
      this.frames = this.frames.slice(this.head);
      this.head = 0;
    }
  }

  /** Bytes of frames held: at most the cap plus one frame. */
  get heldBytes(): number {
    return this.bytes;
  }

  /** Seq of the oldest frame held (== lastSeq + 1 when empty). */
  get oldestSeq(): number {
    return this.firstSeq;
  }

  get lastSeq(): number {
    return this.firstSeq + (this.frames.length - this.head) - 1;
  }

  /** Frames with seq ≥ from, oldest first (from below oldestSeq starts at oldestSeq). */
  *from(from: number): Iterable<Buffer> {
    const start = this.head + Math.max(0, from - this.firstSeq);
    for (let i = start; i < this.frames.length; i++) yield this.frames[i]!;
  }
}
