export { main, UsageError } from './main';
export { fastPaths } from './devices';
