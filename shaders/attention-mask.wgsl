// attention-mask: the positional key-visibility rule of every attention kernel (attention-fwd,
// attention-bwd-dq, attention-bwd-dkdv, attention-decode), written once and prepended to each of them by the
// wrappers in ops/attention. No bindings, params or entry point of its own.
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
