// w_q5_k.wgsl - weight decoder for Q5_K: as Q4_K with a fifth bit per
// weight, x = d * sc_j * q - dmin * m_j, q in 0..31.
// Block (44 words, unchanged from GGUF): word 0 = d, dmin; words 1..3 =
// scales; words 4..11 = qh (bit j of byte l is the fifth bit of element l of
// sub-block j); words 12..43 = nibbles laid out as in Q4_K.
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn kbyte(k: u32, base: u32, idx: u32) -> u32 {
    return (ww(k, base + (idx >> 2u)) >> (8u * (idx & 3u))) & 0xffu;
}

fn q5k_scale_min(k: u32, base: u32, j: u32) -> vec2<f32> {
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
    let base = P.wo[k] + b * 44u;
    let dd = unpack2x16float(ww(k, base));
    let sm = q5k_scale_min(k, base, j);
    let sc = dd.x * sm.x;
    let mn = dd.y * sm.y;
    let s = (j & 1u) * 4u;
    let qb = base + 12u + 8u * (j / 2u);
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        let word = ww(k, qb + i);
        let lo = (vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u) >> vec4<u32>(s)) & vec4<u32>(15u);
        let h = ww(k, base + 4u + i);
        let hi = (vec4<u32>(h, h >> 8u, h >> 16u, h >> 24u) >> vec4<u32>(j)) & vec4<u32>(1u);
        r[i] = vec4<f32>(lo | (hi << vec4<u32>(4u))) * sc - mn;
    }
    return r;
}
