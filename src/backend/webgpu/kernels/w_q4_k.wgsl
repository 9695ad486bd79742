// w_q4_k.wgsl - weight decoder for Q4_K: super-blocks of 256 weights in 8
// sub-blocks of 32, x = d * sc_j * q - dmin * m_j with 6-bit sc_j, m_j.
// Block (36 words, the 144 bytes of GGUF with the nibbles regrouped at
// upload by wg_repack.c): word 0 = d, dmin (f16); words 1..3 = the 12 packed
// scale bytes; words 4 + 4j .. 7 + 4j = sub-block j, whose byte i holds
// element i (low nibble) and element i + 16 (high nibble), as in Q4_0.
// (GGUF interleaves two sub-blocks over 32 bytes: 8 loads per group, not 4.)
// Groups g are sub-blocks: block g / 8, sub-block g % 8.
const GROUP: u32 = 32u;
const GV: u32 = 8u;

// Per-block words (W_HEAD): the lane-rows matvec loads a block's first four
// words (d, dmin and the scales) once per block and row with w_head, and
// decodes each group with w_affine_h (nibbles q, d = d sc_j, m = -dmin m_j);
// w_group does both.
const GPB: u32 = 8u; // groups per block
alias WHead = vec4<u32>; // the per-block words: d, dmin, the packed scales

fn w_head(k: u32, row: u32, blk: u32) -> WHead {
    let base = P.wo[k] + (row * P.bpr + blk) * 36u;
    return vec4<u32>(ww(k, base), ww(k, base + 1u), ww(k, base + 2u), ww(k, base + 3u));
}

// byte i (0..11) of the packed scales in h.y, h.z, h.w (selects, not a
// dynamic index, which a CPU adapter's JIT handles lane by lane)
fn kbyte(h: vec4<u32>, i: u32) -> u32 {
    let w = select(select(h.y, h.z, i >= 4u), h.w, i >= 8u);
    return (w >> (8u * (i & 3u))) & 0xffu;
}

// (scale, min) of sub-block j: 6 bits each, the high 2 bits of j >= 4 kept
// in the top bits of the bytes of j - 4 and j
fn q4k_scale_min(h: vec4<u32>, j: u32) -> vec2<f32> {
    let hi = j >= 4u;
    let a = kbyte(h, select(j, j + 4u, hi));
    let b = kbyte(h, select(j + 4u, j - 4u, hi));
    let c = kbyte(h, j);
    let sc = select(a & 63u, (a & 15u) | ((b >> 6u) << 4u), hi);
    let m = select(b & 63u, (a >> 4u) | ((c >> 6u) << 4u), hi);
    return vec2<f32>(f32(sc), f32(m));
}

fn w_affine_h(k: u32, row: u32, g: u32, h: WHead) -> WAff {
    let j = g % 8u;
    let base = P.wo[k] + (row * P.bpr + g / 8u) * 36u;
    let dd = unpack2x16float(h.x);
    let sm = q4k_scale_min(h, j);
    let sc = dd.x * sm.x;
    let mn = dd.y * sm.y;
    let qb = base + 4u + 4u * j;
    var a: WAff;
    for (var i = 0u; i < 4u; i++) {
        let word = ww(k, qb + i);
        let q = vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u);
        a.q[i] = vec4<f32>(q & vec4<u32>(15u));
        a.q[i + 4u] = vec4<f32>((q >> vec4<u32>(4u)) & vec4<u32>(15u));
    }
    a.d = vec2<f32>(sc);
    a.m = vec2<f32>(-mn);
    return a;
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    return affine_expand(w_affine_h(k, row, g, w_head(k, row, g / 8u)));
}
