// A file written from a head and byte ranges of other files (src/transcode/outputs/byte-ranges.ts):
// ranges alternating between sources, going back inside a source, and larger than its
// blocks, come out in order, byte for byte.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeRanges, type ByteRange } from '../../src/transcode/outputs/byte-ranges.ts';

let dir: string;
const data: Record<string, Buffer> = {};

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-ranges-'));
  for (const [name, size] of [
    ['a', 9 << 20],
    ['b', 300_000],
  ] as const) {
    data[name] = randomBytes(size);
    await writeFile(path.join(dir, name), data[name]);
  }
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('the head, then each range in order, byte for byte', async () => {
  const at = (file: string, start: number, bytes: number): ByteRange => ({ file: path.join(dir, file), start, bytes });
  const ranges = [
    at('a', 0, 1000),
    at('b', 10, 5000),
    at('a', 1000, 70_000),
    // Back inside a block already read, then past its end, then one range over 4 MiB.
    at('b', 0, 20),
    at('a', 500, 10),
    at('a', (4 << 20) - 7, 100),
    at('a', 3 << 20, 5 << 20),
    at('b', 299_000, 1000),
  ];
  const head = Buffer.from('head');
  const output = path.join(dir, 'out');
  await writeRanges({ output, head, ranges });
  const expected = Buffer.concat([
    head,
    ...ranges.map((r) => (data[path.basename(r.file)] ?? Buffer.alloc(0)).subarray(r.start, r.start + r.bytes)),
  ]);
  assert.ok((await readFile(output)).equals(expected));
});

test('a range past the end of its file fails the write', async () => {
  await assert.rejects(
    writeRanges({
      output: path.join(dir, 'short'),
      head: Buffer.alloc(0),
      ranges: [{ file: path.join(dir, 'b'), start: 299_990, bytes: 100 }],
    }),
    /ends inside its media data/,
  );
});
