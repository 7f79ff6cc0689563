// The immutable files (init segments, parts, segments) a viewer's node fetched from another
// node, kept while they are recent: viewers of one stream ask for the same few files within
// a few seconds of each other. Least recently used goes first past either bound.

export class FileCache {
  readonly #files = new Map<string, Buffer>();
  readonly #maxBytes: number;
  readonly #maxFiles: number;
  #bytes = 0;

  constructor(o: { maxBytes: number; maxFiles?: number }) {
    this.#maxBytes = o.maxBytes;
    this.#maxFiles = o.maxFiles ?? 4096;
  }

  get(key: string): Buffer | undefined {
    const file = this.#files.get(key);
    if (file === undefined) return undefined;
    // A Map iterates in insertion order: set again, it is the newest.
    this.#files.delete(key);
    this.#files.set(key, file);
    return file;
  }

  set(key: string, file: Buffer): void {
    if (file.length > this.#maxBytes) return;
    const old = this.#files.get(key);
    if (old !== undefined) {
      this.#files.delete(key);
      this.#bytes -= old.length;
    }
    this.#files.set(key, file);
    this.#bytes += file.length;
    for (const [oldest, bytes] of this.#files) {
      if (this.#bytes <= this.#maxBytes && this.#files.size <= this.#maxFiles) break;
      this.#files.delete(oldest);
      this.#bytes -= bytes.length;
    }
  }

  get bytes(): number {
    return this.#bytes;
  }
}
