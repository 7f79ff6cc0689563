// The shape of a setting declaration.

export type SettingType = 'string' | 'int' | 'number' | 'bool' | 'enum' | 'list';

interface Base<T> {
  env: string;
  description: string;
  /** Roles that read this setting; used only to group the help text. */
  group: 'server' | 'database' | 'tasks' | 'transcode' | 'storage' | 'dweb' | 'c2pa' | 'llm' | 'orchestrator' | 'live';
  default: T;
  /** Shown instead of the default in docs when the default is computed at start-up. */
  defaultText?: string;
  /** Never printed (help shows whether it is set, logs never show it). */
  secret?: boolean;
}
export interface StringSetting extends Base<string | undefined> {
  type: 'string';
}
export interface IntSetting extends Base<number> {
  type: 'int';
  min?: number;
  max?: number;
}
export interface NumberSetting extends Base<number> {
  type: 'number';
  min?: number;
  max?: number;
  exclusiveMin?: number;
}
export interface BoolSetting extends Base<boolean> {
  type: 'bool';
}
export interface EnumSetting<V extends string = string> extends Base<V> {
  type: 'enum';
  values: readonly V[];
}
export interface ListSetting extends Base<string[]> {
  type: 'list';
}
export type Setting = StringSetting | IntSetting | NumberSetting | BoolSetting | EnumSetting | ListSetting;

/** Declares a group of settings with their literal types kept (for the Config type). */
export function defineSettings<const S extends Record<string, Setting>>(s: S): S {
  return s;
}
