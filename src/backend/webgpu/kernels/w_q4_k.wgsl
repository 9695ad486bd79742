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

fn kbyte(k: u32, base: u32, idx: u32) -> u32 {
    return (ww(k, base + (idx >> 2u)) >> (8u * (idx & 3u))) & 0xffu;
}

// (scale, min) of sub-block j from the 12 scale bytes at word base + 1
fn q4k_scale_min(k: u32, base: u32, j: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(kbyte(k, base + 1u, j) & 63u), f32(kbyte(k, base + 1u, j + 4u) & 63u));
    }
    let a = kbyte(k, base + 1u, j + 4u);
    let sc = (a & 15u) | ((kbyte(k, base + 1u, j - 4u) >> 6u) << 4u);
    let m = (a >> 4u) | ((kbyte(k, base + 1u, j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g / 8u;
    let j = g % 8u;
    let base = P.wo[k] + b * 36u;
    let dd = unpack2x16float(ww(k, base));
    let sm = q4k_scale_min(k, base, j);
    let sc = dd.x * sm.x;
    let mn = dd.y * sm.y;
    let qb = base + 4u + 4u * j;
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 4u; i++) {
        let word = ww(k, qb + i);
        let q = vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u);
        r[i] = vec4<f32>(q & vec4<u32>(15u)) * sc - mn;
        r[i + 4u] = vec4<f32>((q >> vec4<u32>(4u)) & vec4<u32>(15u)) * sc - mn;
    }
    return r;
}
