// w_q8_0.wgsl - weight decoder for Q8_0 (x = d * q, q signed 8 bits).
// GPU layout: per block 8 words of int8 quants; f16 scales in the region at P.sb[k].
const GROUP: u32 = 32u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

fn w_vec4(k: u32, row: u32, g: u32, i: u32) -> vec4<f32> {
    let b = row * P.bpr + g;
    let word = ww(k, P.wo[k] + b * 8u + i);
    let q = bitcast<vec4<i32>>(vec4<u32>(word << 24u, word << 16u, word << 8u, word)) >> vec4<u32>(24u);
    return vec4<f32>(q) * w_f16_at(k, b);
}
