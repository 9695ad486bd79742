// w_q5_0.wgsl - weight decoder for Q5_0 (x = d * (q - 16), q 5 bits).
// GPU layout: per block 5 words: qh (bit e is the fifth bit of element e),
// then 4 words of nibbles as Q4_0; f16 scales in the region at P.sb[k].
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

fn bytes4(word: u32) -> vec4<u32> { return vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u); }

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g;
    let d = w_f16_at(k, b);
    let base = P.wo[k] + b * 5u;
    let qh = ww(k, base);
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 4u; i++) {
        let q = bytes4(ww(k, base + 1u + i));
        let hl = (vec4<u32>(qh) >> (vec4<u32>(4u * i) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
        let hh = (vec4<u32>(qh) >> (vec4<u32>(16u + 4u * i) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
        r[i] = (vec4<f32>((q & vec4<u32>(15u)) | (hl << vec4<u32>(4u))) - 16.0) * d;
        r[i + 4u] = (vec4<f32>(((q >> vec4<u32>(4u)) & vec4<u32>(15u)) | (hh << vec4<u32>(4u))) - 16.0) * d;
    }
    return r;
}
