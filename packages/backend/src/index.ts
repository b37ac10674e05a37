export * from './errors';
export * from './dtype';
export * from './format';
export { BufferPool, sizeClass, fmtBytes, type GpuBuffer, type MemoryStats } from './buffer-pool';
export {
  Context,
  createContext,
  type ContextOptions,
  type ContextInfo,
  type Kernel,
  type OptionalFeature,
  type SubgroupMatrixConfig,
  type BufferSlice,
  type BufferBinding,
} from './context';
export {
  kernelSource,
  constPrelude,
  wgslPacker,
  kernelKey,
  kernelBaseKey,
  codeHash,
  type KernelDef,
  type BindingSpec,
  type ParamSpec,
} from './kernel';
export type { SpeedToggles } from './gpu-provider';
export { cachedKernel, checkedKernel, kernelsReady, kernelFailures } from './kernel-cache';
export { grid1d, grid2d, dispatch1d } from './grid';
export type { SubBuffer } from './sub-buffer';
export * from './tensor';
export { cast } from './ops/cast';
export { accumulate } from './ops/accumulate';
export { copyRows } from './ops/copy-rows';
export * from './ops/core';
export * from './ops/llm';
export * from './ops/attention';
export * from './ops/optim';
export * as testing from './testing';
export { mulberry32 } from './random';
export * from './ops/quant';
