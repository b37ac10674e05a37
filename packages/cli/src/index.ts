export { main, UsageError } from './main';
export { fastPaths } from './commands/devices';
export { parseArgs, helpText, flag, withDefault, type CommandSpec, type Flag, type Flags, type OptionsOf } from './args';
export { lineChartSvg, lossCurveSvg, niceTicks, smooth, type Series, type ChartOptions } from './svg';
export { Progress, fmtDuration, fmtCount, type ProgressOptions, type ProgressMode } from './progress';
export { describeError, InputError, OOM_HINT } from './errors';
