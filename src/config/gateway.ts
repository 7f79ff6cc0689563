import { defineSettings } from './types.ts';

// Settings of the gateway domain (see types.ts for the shape of an entry).
export const gatewaySettings = defineSettings({
});
