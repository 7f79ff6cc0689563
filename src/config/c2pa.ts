import { defineSettings } from './types.ts';

// Settings of the c2pa domain (see types.ts for the shape of an entry).
export const c2paSettings = defineSettings({
});
