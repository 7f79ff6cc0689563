import type { LadderPlan } from './ladder.ts';
import { type LiveRendition, multivariantPlaylist, type VariantInfo } from './llhls/index.ts';
import { SOURCE_RENDITION } from './profiles.ts';
import type { LiveLadder, ServedRendition } from './types.ts';

// What players are offered of a session's renditions: the multivariant playlist of those
// listed now, and each rendition as the API serves it.

export class LadderView implements LiveLadder {
  private readonly all: ReadonlyMap<string, LiveRendition>;
  private readonly plan: () => LadderPlan | undefined;
  private readonly sourceListable: () => boolean;
  private readonly views = new WeakMap<LiveRendition, ServedRendition>();

  constructor(o: {
    all: ReadonlyMap<string, LiveRendition>;
    plan: () => LadderPlan | undefined;
    /** The source's keyframes allow it in the playlist (session.ts). */
    sourceListable: () => boolean;
  }) {
    this.all = o.all;
    this.plan = o.plan;
    this.sourceListable = o.sourceListable;
  }

  multivariant(uriQuery?: string): string | undefined {
    const listed = this.listed();
    if (listed.length === 0 || !listed.every((r) => r.ready)) return undefined;
    const variants = listed.map((r) => this.variantOf(r));
    return multivariantPlaylist(variants, uriQuery);
  }

  rendition(name: string): ServedRendition | undefined {
    const r = this.all.get(name);
    return r && this.served(r);
  }

  renditions(): readonly ServedRendition[] {
    return this.listed().map((r) => this.served(r));
  }

  /**
   * A rendition as the API serves it: its rendition reports (EXT-X-RENDITION-REPORT) name the
   * siblings a player is offered now, whatever the caller passes.
   */
  private served(r: LiveRendition): ServedRendition {
    let view = this.views.get(r);
    if (!view) {
      view = {
        name: r.name,
        get ready() {
          return r.ready;
        },
        playlist: (req) => r.playlist({ ...req, others: this.listed().filter((o) => o !== r) }),
        file: (name, signal) => r.file(name, signal),
      };
      this.views.set(r, view);
    }
    return view;
  }

  /** The renditions a player is offered: the rungs, and the source when its keyframes allow. */
  listed(): LiveRendition[] {
    const names = this.plan()?.renditions.map((r) => r.name) ?? [];
    const onlySource = names.length === 1;
    return names
      .filter((n) => n !== SOURCE_RENDITION || onlySource || this.sourceListable())
      .flatMap((n) => this.all.get(n) ?? []);
  }

  private variantOf(r: LiveRendition): VariantInfo {
    const planned = this.plan()?.renditions.find((p) => p.name === r.name);
    const stats = r.stats();
    const width = stats.width ?? planned?.width;
    const height = stats.height ?? planned?.height;
    return {
      name: r.name,
      bandwidth: planned?.bandwidth ?? 1_000_000,
      ...(width !== undefined && height !== undefined ? { width, height } : {}),
      ...(stats.codecs ? { codecs: stats.codecs } : {}),
      ...(planned?.frameRate ? { frameRate: planned.frameRate } : {}),
    };
  }
}
