export { type AttentionOptions } from './attention/common';
export {
  flashAttention,
  flashAttentionBackward,
  flashAttentionTcPath,
  ATTENTION_DS_BUDGET,
  type FlashAttentionOptions,
  type FlashAttentionBackwardOptions,
  type FlashAttentionResult,
  type FlashAttentionGrads,
} from './attention/flash';
export {
  attentionTcPath,
  attentionTcReady,
  attentionTcFailures,
  type TcAttnPath,
  type TcAttnTile,
  type TcAttnTiles,
} from './attention/flash-tc';
export { attentionDecode, type AttentionDecodeOptions } from './attention/decode';
export { attentionTiles, type AttentionTile, type AttentionTiles } from './attention/tiles';
