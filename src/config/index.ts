export { loadConfig, ConfigError, settingsTable, settingsHelp, flagName, explicitSettings } from './load.ts';
export { settings, type Config, type SettingKey } from './schema.ts';
export type { Setting } from './types.ts';
