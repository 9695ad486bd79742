// w_q5_1.wgsl - weight decoder for Q5_1 (x = d * q + m, q 5 bits).
// GPU layout: per block 5 words (qh, then nibbles) as Q5_0, and one word
// (d, m as two f16) per block in the region at P.sb[k].
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn bytes4(word: u32) -> vec4<u32> { return vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u); }

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g;
    let dm = unpack2x16float(ww(k, P.sb[k] + b));
    let base = P.wo[k] + b * 5u;
    let qh = ww(k, base);
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 4u; i++) {
        let q = bytes4(ww(k, base + 1u + i));
        let hl = (vec4<u32>(qh) >> (vec4<u32>(4u * i) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
        let hh = (vec4<u32>(qh) >> (vec4<u32>(16u + 4u * i) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
        r[i] = vec4<f32>((q & vec4<u32>(15u)) | (hl << vec4<u32>(4u))) * dm.x + dm.y;
        r[i + 4u] = vec4<f32>(((q >> vec4<u32>(4u)) & vec4<u32>(15u)) | (hh << vec4<u32>(4u))) * dm.x + dm.y;
    }
    return r;
}
