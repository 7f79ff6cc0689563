import { defineSettings } from './types.ts';

// Settings of the storage domain (see types.ts for the shape of an entry).
export const storageSettings = defineSettings({
});
