import type { LiveCounters } from './types.ts';

// What the rows of streams (500) and stream_sessions (503) both hold: the counters a live
// session reports (LiveCounters, its stream keeps the latest) and timestamps. One reading of
// them for both tables, from a query (Date) or from an outbox event's JSON (ISO string).

/** The counters' columns as a row has them (numbers may come back as strings from bigint columns). */
export interface CounterRow {
  is_healthy: boolean | null;
  issues: string[] | null;
  ingest_rate: number;
  outgoing_rate: number;
  source_segments: number;
  transcoded_segments: number;
  source_segments_duration: number;
  transcoded_segments_duration: number;
  source_bytes: number;
  transcoded_bytes: number;
}

export const COUNTER_COLUMNS = `is_healthy, issues, ingest_rate, outgoing_rate, source_segments, transcoded_segments,
  source_segments_duration, transcoded_segments_duration, source_bytes, transcoded_bytes`;

/** The counters of a row; `isHealthy` null while it has never been live. */
export function countersFromRow(r: CounterRow): Omit<LiveCounters, 'isHealthy'> & { isHealthy: boolean | null } {
  return {
    isHealthy: r.is_healthy,
    issues: r.issues ?? [],
    ingestRate: Number(r.ingest_rate),
    outgoingRate: Number(r.outgoing_rate),
    sourceSegments: Number(r.source_segments),
    transcodedSegments: Number(r.transcoded_segments),
    sourceSegmentsDuration: Number(r.source_segments_duration),
    transcodedSegmentsDuration: Number(r.transcoded_segments_duration),
    sourceBytes: Number(r.source_bytes),
    transcodedBytes: Number(r.transcoded_bytes),
  };
}

export const dateOf = (d: Date | string): Date => (d instanceof Date ? d : new Date(d));
export const optionalDate = (d: Date | string | null): Date | undefined => (d === null ? undefined : dateOf(d));
