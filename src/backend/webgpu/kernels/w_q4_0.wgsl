// w_q4_0.wgsl - weight decoder for Q4_0 (32 weights per block: x = d * (q - 8)).
// GPU layout (wg_repack.c): per block 4 words of nibbles (byte j holds
// element j in the low nibble and j+16 in the high one), and the f16 scales
// d of all blocks in a separate region starting at word P.sb[k].
// w_affine(k, row, g): block g of `row` as nibbles q, d and m = -8 d.
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

fn bytes4(word: u32) -> vec4<u32> { return vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u); }

fn w_affine(k: u32, row: u32, g: u32) -> WAff {
    let b = row * P.bpr + g;
    let d = w_f16_at(k, b);
    let base = P.wo[k] + b * 4u;
    var a: WAff;
    for (var i = 0u; i < 4u; i++) {
        let q = bytes4(ww(k, base + i));
        a.q[i] = vec4<f32>(q & vec4<u32>(15u));
        a.q[i + 4u] = vec4<f32>((q >> vec4<u32>(4u)) & vec4<u32>(15u));
    }
    a.d = vec2<f32>(d);
    a.m = vec2<f32>(-8.0 * d);
    return a;
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> { return affine_expand(w_affine(k, row, g)); }
