// w_q4_1.wgsl - weight decoder for Q4_1 (x = d * q + m, q in 0..15).
// GPU layout: per block 4 words of nibbles (as Q4_0), and one word (d, m as
// two f16) per block in the region at P.sb[k].
const GROUP: u32 = 32u;

fn nibbles(word: u32, high: bool) -> vec4<f32> {
    let s = select(0u, 4u, high);
    return vec4<f32>((vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u) >> vec4<u32>(s)) & vec4<u32>(15u));
}

fn w_vec4(k: u32, row: u32, g: u32, i: u32) -> vec4<f32> {
    let b = row * P.bpr + g;
    let dm = unpack2x16float(ww(k, P.sb[k] + b));
    let word = ww(k, P.wo[k] + b * 4u + (i & 3u));
    return nibbles(word, i >= 4u) * dm.x + dm.y;
}
