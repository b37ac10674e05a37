// attention-mask: the positional key-visibility rule and the logit soft-capping of every attention kernel
// (attention-fwd, attention-bwd-dq, attention-bwd-dkdv, attention-decode), written once and prepended to each
// of them by the wrappers in ops/attention. No bindings, params or entry point of its own.
//
// A key at absolute position s is visible to a query at absolute position q iff
//   (!causal || s <= q) && (win == 0 || s > q - win)
// (HF transformers masking_utils: causal_mask_function `kv_idx <= q_idx` and-ed with sliding_window_overlay
// `kv_idx > q_idx - sliding_window`; the window holds `win` keys, the query's own position included; win = 0
// means no window, and a window is only used with causal masking). Key padding and bounds are applied by the
// kernels on top of this rule. The range helpers let the kernels skip key (or query) tiles that no pair in
// them can see, so that a windowed pass costs O(T * win) instead of O(T * S).

struct AttnMask {
  causal: bool,
  win: i32,
}

fn attn_mask(causal: u32, win: u32) -> AttnMask {
  return AttnMask(causal != 0u, i32(win));
}

fn attn_visible(m: AttnMask, q: i32, s: i32) -> bool {
  return (!m.causal || s <= q) && (m.win == 0 || s > q - m.win);
}

// Keys [x, y) that at least one query with position in [qa, qb] sees, clamped to [0, S) (x >= y: none).
fn attn_key_range(m: AttnMask, qa: i32, qb: i32, S: u32) -> vec2<u32> {
  var hi = i32(S);
  if (m.causal) { hi = clamp(qb + 1, 0, i32(S)); }
  var lo = 0;
  if (m.win > 0) { lo = clamp(qa - m.win + 1, 0, hi); }
  return vec2<u32>(u32(lo), u32(hi));
}

// The tiles of bc keys that query rows [t0, t0 + br) (clamped to T; position qOffset + t) need: tiles [x, y) of
// attn_key_range (y <= x: none).
fn attn_key_tiles(m: AttnMask, qOffset: i32, t0: u32, br: u32, T: u32, S: u32, bc: u32) -> vec2<u32> {
  let kr = attn_key_range(m, qOffset + i32(t0), qOffset + i32(min(t0 + br, T)) - 1, S);
  let first = kr.x / bc;
  return vec2<u32>(first, select(first, (kr.y + bc - 1u) / bc, kr.y > kr.x));
}

// Query rows t in [x, y) (position qOffset + t) that see at least one key in [sa, sb], clamped to [0, T).
fn attn_query_range(m: AttnMask, qOffset: i32, sa: i32, sb: i32, T: u32) -> vec2<u32> {
  var lo = 0;
  if (m.causal) { lo = clamp(sa - qOffset, 0, i32(T)); }
  var hi = i32(T);
  if (m.win > 0) { hi = clamp(sb + m.win - qOffset, lo, i32(T)); }
  return vec2<u32>(u32(lo), u32(hi));
}

// Whether every key in [sa, sb] is visible to every query with position in [qa, qb] (no per-pair test needed).
fn attn_all_visible(m: AttnMask, qa: i32, qb: i32, sa: i32, sb: i32) -> bool {
  return (!m.causal || sb <= qa) && (m.win == 0 || sa > qb - m.win);
}

// Logit soft-capping (Gemma 2's attn_logit_softcapping): score = softcap * tanh(scale * q.k / softcap),
// applied before masking and softmax. The kernels pass capmul = softcap * log2(e) (scores in log2 units) and
// capin = scale / softcap; capmul = 0 means no capping.

// tanh without overflow or NaN at any |x|, and accurate near 0 (a series there instead of 1 - e^(-2|x|)).
fn attn_tanh(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.125) {
    let x2 = x * x;
    return x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * -0.05396825396825397)));
  }
  let e = exp(-2.0 * a);
  return sign(x) * (1.0 - e) / (1.0 + e);
}

// A forward score already multiplied by capin (capped) or by scale * log2(e) (not capped), in log2 units.
fn attn_cap(x: f32, capmul: f32) -> f32 {
  if (capmul == 0.0) { return x; }
  return attn_tanh(x) * capmul;
}

// From a raw dot product d = q.k: (the score in log2 units, d(score) / d(scale * q.k)), for the backward.
fn attn_score(d: f32, scale2: f32, capin: f32, capmul: f32) -> vec2<f32> {
  if (capmul == 0.0) { return vec2<f32>(d * scale2, 1.0); }
  let th = attn_tanh(d * capin);
  return vec2<f32>(th * capmul, 1.0 - th * th);
}
