// w_q4_1.wgsl - weight decoder for Q4_1 (x = d * q + m, q in 0..15).
// GPU layout: per block 4 words of nibbles (as Q4_0), and one word (d, m as
// two f16) per block in the region at P.sb[k].
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn bytes4(word: u32) -> vec4<u32> { return vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u); }

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g;
    let dm = unpack2x16float(ww(k, P.sb[k] + b));
    let base = P.wo[k] + b * 4u;
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 4u; i++) {
        let q = bytes4(ww(k, base + i));
        r[i] = vec4<f32>(q & vec4<u32>(15u)) * dm.x + dm.y;
        r[i + 4u] = vec4<f32>((q >> vec4<u32>(4u)) & vec4<u32>(15u)) * dm.x + dm.y;
    }
    return r;
}
