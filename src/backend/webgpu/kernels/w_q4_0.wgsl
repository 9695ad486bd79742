// w_q4_0.wgsl - weight decoder for Q4_0 (32 weights per block: x = d * (q - 8)).
// GPU layout (wg_repack.c): per block 4 words of nibbles (byte j holds
// element j in the low nibble and j+16 in the high one), and the f16 scales
// d of all blocks in a separate region starting at word P.sb[k].
const GROUP: u32 = 32u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

fn nibbles(word: u32, high: bool) -> vec4<f32> {
    let s = select(0u, 4u, high);
    return vec4<f32>((vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u) >> vec4<u32>(s)) & vec4<u32>(15u));
}

fn w_vec4(k: u32, row: u32, g: u32, i: u32) -> vec4<f32> {
    let b = row * P.bpr + g;
    let d = w_f16_at(k, b);
    let word = ww(k, P.wo[k] + b * 4u + (i & 3u));
    return (nibbles(word, i >= 4u) - 8.0) * d;
}
