// w_bf16.wgsl - weight decoder for BF16 rows (any length): a bf16 is the top
// half of an f32, so each is a shift away from its f32 bits.
const GROUP: u32 = 4u;
const GV: u32 = 1u;

fn w_half(k: u32, h: u32) -> f32 {
    let word = ww(k, P.wo[k] + (h >> 1u));
    return bitcast<f32>(select(word << 16u, word & 0xffff0000u, (h & 1u) == 1u));
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 1> {
    let e = g * 4u;
    let h = row * P.K + e;
    var v = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (e + c < P.K) { v[c] = w_half(k, h + c); }
    }
    return array<vec4<f32>, 1>(v);
}
