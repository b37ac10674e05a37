export * from './core/elementwise';
export * from './core/reduce';
export * from './core/transpose';
export * from './core/matmul';
export { broadcastShapes } from './core/util';
export * from './core/matmul-tc';
export { setF32MatmulPrecision, f32MatmulPrecision, f16x3Tuning, type F32MatmulPrecision } from './core/matmul-f16x3';
export { prepareF16Images, releaseF16Images, f16ImageOf, f16ImageStats, f16ImageTuning, type F16Image } from './core/matmul-f16-images';
export * from './core/lowrank';
