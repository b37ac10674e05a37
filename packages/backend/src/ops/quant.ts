export * from './quant/formats';
export { quantize, dequantize, quantScales, releaseQuant, describeQuant, quantPrelude } from './quant/quantize';
export { quantLinear, quantLinearBackward, quantTuning, QUANT_GEMV_MAX_ROWS, type QuantLinearOptions, type QuantMatmulVariant } from './quant/qmatmul';
export { QTC_TILES, qtcTuning, qtcTileProblem, qtcFailures, quantLinearTc, planQtc, qtcPlan, quantRowsOnTensorCores, lastQtcKernel, type QtcTile, type QtcTileName, type QtcOptions } from './quant/qmatmul-tc';
export {
  quantizeRef,
  dequantizeRef,
  dqScalesRef,
  packCodes,
  unpackCodes,
  codeValue,
  nf4Code,
  blockErrorBound,
  roundEven,
  type HostQuant,
} from './quant/quant.ref';
export { gemv16, gemvGated, gemvTuning, gemvSubgroupsAvailable, gemvTakesLimbs, GEMV_MAX_ROWS, type Gemv16Options, type GemvGate } from './quant/gemv';
export { gemvParts, gemvPartsProblem, tryGemvParts, type GemvPart, type GemvPartsOptions } from './quant/gemv-parts';
export { xLimbs, xLimbsAvailable, decodeLimbs, limbsRef, limbWords, LIMB_GROUP, LIMB_QMAX } from './quant/x-limbs';
export {
  int8Linear,
  int8Matmul,
  quantizeRowsI8,
  int8TcPlan,
  contextI8Plan,
  i8TensorCoresReady,
  i8TcFailures,
  i8Tuning,
  I8_TILES,
  I8_MAX_K,
  type RowsI8,
  type I8Tile,
  type I8TileName,
  type I8Path,
  type Int8MatmulOptions,
} from './quant/int8-linear';
