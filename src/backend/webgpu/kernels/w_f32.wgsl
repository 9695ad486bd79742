// w_f32.wgsl - weight decoder for F32 rows (any length).
// w_group(k, row, g): elements 4g..4g+3 of `row` of weight k (GROUP = 4, one
// vec4), zero past the row's end. Words are f32 bits.
const GROUP: u32 = 4u;
const GV: u32 = 1u;

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 1> {
    let e = g * 4u;
    let base = P.wo[k] + row * P.K + e;
    if (e + 4u <= P.K) {
        return array<vec4<f32>, 1>(vec4<f32>(bitcast<f32>(ww(k, base)), bitcast<f32>(ww(k, base + 1u)),
                                             bitcast<f32>(ww(k, base + 2u)), bitcast<f32>(ww(k, base + 3u))));
    }
    var v = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (e + c < P.K) { v[c] = bitcast<f32>(ww(k, base + c)); }
    }
    return array<vec4<f32>, 1>(v);
}
