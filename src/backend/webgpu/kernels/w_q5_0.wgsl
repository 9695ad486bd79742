// w_q5_0.wgsl - weight decoder for Q5_0 (x = d * (q - 16), q 5 bits).
// GPU layout: per block 5 words: qh (bit e is the fifth bit of element e),
// then 4 words of nibbles as Q4_0; f16 scales in the region at P.sb[k].
const GROUP: u32 = 32u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

fn q5(k: u32, b: u32, i: u32) -> vec4<f32> {
    let base = P.wo[k] + b * 5u;
    let qh = ww(k, base);
    let word = ww(k, base + 1u + (i & 3u));
    let s = select(0u, 4u, i >= 4u);
    let lo = (vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u) >> vec4<u32>(s)) & vec4<u32>(15u);
    let hi = (vec4<u32>(qh) >> (vec4<u32>(4u * i) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
    return vec4<f32>(lo | (hi << vec4<u32>(4u)));
}

fn w_vec4(k: u32, row: u32, g: u32, i: u32) -> vec4<f32> {
    let b = row * P.bpr + g;
    return (q5(k, b, i) - 16.0) * w_f16_at(k, b);
}
