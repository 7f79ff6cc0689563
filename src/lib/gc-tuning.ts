import v8 from 'node:v8';

// Garbage collection tuned for a process that streams media (issue #27: uploads and /media).
// Every socket or file read allocates a fresh Buffer, and V8 counts their bytes as external
// memory: by default each 64 MB of it starts a full mark-compact of the whole heap, however
// little of it is still alive (the Buffers die young; scavenges free them). With the ~50 MB
// heap of the service (Fastify, PGlite, the AWS SDK), a 1 GB upload paid for about 16 full
// collections of 30-50 ms each: bench/upload.ts measured 0.35-0.43 of a bare node:http
// server's throughput, and 0.84-1.00 with external memory counted in V8's global heap limit
// instead (the flag below), the peak RSS about 60 MB higher and still flat. V8 reads it at
// run time, so setting it first thing at start-up is enough; a V8 without it prints one line
// and runs as before.

/** Sets V8's flags for streaming; call once, before the servers start. */
export function tuneGcForStreaming(): void {
  v8.setFlagsFromString('--external-memory-accounted-in-global-limit');
}
