// w_q5_1.wgsl - weight decoder for Q5_1 (x = d * q + m, q 5 bits).
// GPU layout: per block 5 words (qh, then nibbles) as Q5_0, and one word
// (d, m as two f16) per block in the region at P.sb[k].
const GROUP: u32 = 32u;

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
    let dm = unpack2x16float(ww(k, P.sb[k] + b));
    return q5(k, b, i) * dm.x + dm.y;
}
