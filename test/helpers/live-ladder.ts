import type { LiveLadder } from '../../src/live/index.ts';
import { type LiveRendition, multivariantPlaylist } from '../../src/live/llhls/index.ts';

/** A ladder of one rendition (320x240), as the runtime's LiveNode would hand it out. */
export function standInLadder(rendition: LiveRendition): LiveLadder {
  return {
    multivariant: (q) =>
      rendition.ready
        ? multivariantPlaylist([{ name: rendition.name, bandwidth: 400_000, width: 320, height: 240 }], q)
        : undefined,
    rendition: (name) => (name === rendition.name ? rendition : undefined),
    renditions: () => [rendition],
  };
}

/** The byte offset in an fMP4 where each moof starts (the parts' boundaries). */
export function moofOffsets(file: Buffer): number[] {
  const offsets: number[] = [];
  for (let at = 0; at + 8 <= file.length; at += file.readUInt32BE(at))
    if (file.toString('latin1', at + 4, at + 8) === 'moof') offsets.push(at);
  return offsets;
}
