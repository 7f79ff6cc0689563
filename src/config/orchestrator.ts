import { defineSettings } from './types.ts';

// Settings of the orchestrator domain (see types.ts for the shape of an entry).
export const orchestratorSettings = defineSettings({
});
