import type { BuiltinStore } from '../storage/builtin/index.ts';

/**
 * Bytes of uploads not yet whole, one file per asset in a folder of the data directory
 * (`<dataDir>/uploads`): the offset of a tus upload is the size of its file, so an upload
 * resumes after a dropped connection or a restart of the service.
 */
export class UploadStaging {
  constructor(_o: { dir: string; store: BuiltinStore; maxBytes: number }) {}
}
