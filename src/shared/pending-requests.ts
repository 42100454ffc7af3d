// Requests one side of a postMessage channel sends and the replies that carry their id back: ids
// are handed out here, each reply is taken once, and replies to forgotten requests (the page got a
// new snapshot) are dropped. `Context` is what the requester needs again when the reply arrives.
export class PendingRequests<Context> {
  private nextId = 1;
  private readonly open = new Map<number, Context>();

  /** Registers a request; send the returned id with it. */
  start(context: Context): number {
    const id = this.nextId++;
    this.open.set(id, context);
    return id;
  }

  /** The context of the request a reply answers, once; undefined for an unknown, repeated or forgotten id. */
  settle(id: number): Context | undefined {
    const context = this.open.get(id);
    this.open.delete(id);
    return context;
  }

  /** Forgets every open request: their replies, if they still come, are dropped. */
  clear(): void {
    this.open.clear();
  }

  get size(): number {
    return this.open.size;
  }
}
