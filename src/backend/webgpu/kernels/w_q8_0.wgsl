// w_q8_0.wgsl - weight decoder for Q8_0 (x = d * q, q signed 8 bits).
// GPU layout: per block 8 words of int8 quants; f16 scales in the region at P.sb[k].
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

// Block g of `row` as q, d and m = 0.
fn w_affine(k: u32, row: u32, g: u32) -> WAff {
    let b = row * P.bpr + g;
    let d = w_f16_at(k, b);
    let base = P.wo[k] + b * 8u;
    var a: WAff;
    for (var i = 0u; i < 8u; i++) {
        let w = ww(k, base + i);
        let q = bitcast<vec4<i32>>(vec4<u32>(w << 24u, w << 16u, w << 8u, w)) >> vec4<u32>(24u);
        a.q[i] = vec4<f32>(q);
    }
    a.d = vec2<f32>(d);
    a.m = vec2<f32>(0.0);
    return a;
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> { return affine_expand(w_affine(k, row, g)); }
