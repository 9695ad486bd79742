// w_f16.wgsl - weight decoder for F16 rows (any length): two halves per
// u32 word, unpacked with unpack2x16float (core WGSL, no shader-f16 needed).
// w_group(k, row, g): elements 4g..4g+3 of `row`, zero past the row's end.
const GROUP: u32 = 4u;
const GV: u32 = 1u;

fn w_half(k: u32, h: u32) -> f32 {
    return unpack2x16float(ww(k, P.wo[k] + (h >> 1u)))[h & 1u];
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 1> {
    let e = g * 4u;
    let h = row * P.K + e;
    if (e + 4u <= P.K && (h & 1u) == 0u) {
        let a = unpack2x16float(ww(k, P.wo[k] + (h >> 1u)));
        let b = unpack2x16float(ww(k, P.wo[k] + (h >> 1u) + 1u));
        return array<vec4<f32>, 1>(vec4<f32>(a, b));
    }
    var v = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (e + c < P.K) { v[c] = w_half(k, h + c); }
    }
    return array<vec4<f32>, 1>(v);
}
