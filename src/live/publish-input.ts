import { Writable } from 'node:stream';
import { FlvFormatError, FlvReader, type FlvTagInfo } from './flv-reader.ts';
import type { FlvSink, PublishAttempt } from './ingest-types.ts';

// One publisher's FLV into a session (a session outlives its publisher by the reconnect window;
// a publisher that comes back gets a new input). The FLV is read tag by tag before ffmpeg sees
// it (garbage cuts the publisher off, not the ladder), held until the source is known (its
// first video frame, after onMetaData and the sequence headers), then passed on with the
// publisher's own backpressure.

/** FLV held before the source is known: a publisher that sends this much without a video frame is cut off. */
const MAX_HELD_BYTES = 2 * 1024 * 1024;

/** What an input asks of its session. */
export interface InputOwner {
  /** The source is known: start (or restart) the ladder with `held` (the FLV so far, its header first). */
  sourceKnown(input: PublishInput, held: Buffer, done: () => void): void;
  /** FLV tags for the running ladder; `done` when it took them. */
  media(input: PublishInput, flv: Buffer, done: () => void): void;
  /** Something the publisher sent ends the publish (an issue for its owner). */
  inputFailed(input: PublishInput, issue: string): void;
  /** The publisher is gone (the listener's `ended`). */
  inputEnded(input: PublishInput, kind: 'left' | 'cut' | 'refused', reason: string): void;
}

export class PublishInput implements FlvSink {
  readonly flv: Writable;
  readonly reader: FlvReader;
  readonly attempt: PublishAttempt;
  /** onMetaData and the sequence headers: a restarted ffmpeg is given them first. */
  readonly configTags = new Map<string, Buffer>();
  /** Cut off by the service (terminate, suspend, delete, shutdown): the session ends without a window. */
  forced = false;
  #owner: InputOwner;
  #batch: FlvTagInfo[] = [];
  #held: Buffer[] = [];
  #heldBytes = 0;
  #started = false;
  #closed = false;
  /** After a ladder restart, media waits for the next keyframe (ffmpeg cannot decode from the middle of a GOP). */
  #awaitKeyframe = false;

  constructor(o: { attempt: PublishAttempt; owner: InputOwner }) {
    this.attempt = o.attempt;
    this.#owner = o.owner;
    this.reader = new FlvReader({ onTag: (t) => this.#batch.push(t) });
    this.flv = new Writable({
      write: (chunk: Buffer, _enc, done) => this.#take(chunk, done),
      highWaterMark: 256 * 1024,
    });
    // The listener ends the stream when the publisher goes; what happens then is `ended`'s.
    this.flv.on('error', () => {});
  }

  // --- FlvSink

  ended(kind: 'left' | 'cut' | 'refused', reason: string): void {
    this.#closed = true;
    this.#owner.inputEnded(this, kind, reason);
  }

  /** Cuts the publisher off; the listener then calls `ended`. */
  cut(reason: string, o: { forced?: boolean } = {}): void {
    if (o.forced) this.forced = true;
    this.attempt.disconnect(reason);
  }

  /** The listener called `ended`: nothing more comes. */
  get closed(): boolean {
    return this.#closed;
  }

  #take(chunk: Buffer, done: () => void): void {
    if (this.#closed) {
      done();
      return;
    }
    try {
      this.reader.push(chunk);
    } catch (err) {
      const what = err instanceof FlvFormatError ? err.message : String(err);
      this.#owner.inputFailed(this, `the publisher sent media that cannot be read (${what}); it was disconnected`);
      done();
      return;
    }
    const tags = this.#batch;
    this.#batch = [];
    for (const t of tags) this.#keepConfig(t);
    if (this.#started) this.#media(tags, done);
    else this.#hold(tags, done);
  }

  /**
   * What a restarted ffmpeg reads first (a new FLV: the header, onMetaData, the sequence
   * headers); the media that follows waits for the next keyframe.
   */
  restartHead(): Buffer {
    this.#awaitKeyframe = true;
    const head = [this.reader.headerBytes, ...this.configTags.values()];
    return Buffer.concat(head.filter((b): b is Buffer => b !== undefined));
  }

  #media(tags: FlvTagInfo[], done: () => void): void {
    const raws: Buffer[] = [];
    for (const t of tags) {
      // Audio waits too: a probe of audio alone leaves the copied source without its header.
      if (this.#awaitKeyframe && t.kind !== 'script' && !t.sequenceHeader) {
        if (t.kind !== 'video' || !t.keyframe) continue;
        this.#awaitKeyframe = false;
      }
      raws.push(t.raw);
    }
    if (raws.length === 0) done();
    else this.#owner.media(this, raws.length === 1 && raws[0] ? raws[0] : Buffer.concat(raws), done);
  }

  #keepConfig(t: FlvTagInfo): void {
    if (t.kind === 'script') this.configTags.set('script', Buffer.from(t.raw));
    else if (t.sequenceHeader) this.configTags.set(t.kind, Buffer.from(t.raw));
  }

  #hold(tags: FlvTagInfo[], done: () => void): void {
    for (const t of tags) {
      this.#held.push(t.raw);
      this.#heldBytes += t.raw.length;
    }
    if (this.reader.videoFrames > 0) {
      this.#started = true;
      // ffmpeg reads an FLV: its header first, then the tags held.
      const held = Buffer.concat([this.reader.headerBytes ?? Buffer.alloc(0), ...this.#held]);
      this.#held = [];
      this.#owner.sourceKnown(this, held, done);
      return;
    }
    if (this.#heldBytes > MAX_HELD_BYTES)
      this.#owner.inputFailed(
        this,
        `no video arrived in the first ${MAX_HELD_BYTES / 1024 / 1024} MB: send H.264 video with the audio`,
      );
    done();
  }
}
