export * from './core/elementwise';
export * from './core/reduce';
export * from './core/transpose';
export * from './core/matmul';
export { broadcastShapes } from './core/util';
export * from './core/matmul-tc';
export * from './core/lowrank';
