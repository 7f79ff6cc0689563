export * from './params.ts';
export { placeholderHandler } from './placeholder.ts';
