export { Tensor, AutogradError, type TensorOptions } from './tensor';
export { backward } from './engine';
export { defineOp, getOp, registeredOps, runOp, OpError, type OpDef, type Op, type InputMeta, type ForwardResult } from './op';
export { noGrad, tidy, isGradEnabled } from './scope';
export { retain, releaseRef } from './storage';
export { gradcheck, type GradcheckOptions, type GradcheckResult } from './gradcheck';
export { checkpoint } from './checkpoint';
export type { Node } from './node';
