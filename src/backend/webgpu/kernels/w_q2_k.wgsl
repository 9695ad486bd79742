// w_q2_k.wgsl - weight decoder for Q2_K: 256 weights, 16 sub-blocks of 16
// with 4-bit scale and min, x = d * sc * q - dmin * m with q the 2-bit quants.
// Block (21 words, unchanged from GGUF): scales (16 bytes, words 0..3: low
// nibble scale, high nibble min), qs (64 bytes, words 4..19), d and dmin
// (word 20). Element e: half n = e/128, j = (e%128)/32, l = e%32: qs byte
// 32n + l bits 2j..2j+1, scale byte 8n + 2j + l/16.
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g / 8u;
    let s8 = g % 8u;
    let n = s8 / 4u;
    let j = s8 % 4u;
    let base = P.wo[k] + b * 21u;
    let dd = unpack2x16float(ww(k, base + 20u));
    let si = 8u * n + 2u * j;
    let sw = ww(k, base + si / 4u);
    let sa = (sw >> (8u * (si % 4u))) & 0xffu;
    let sb = (sw >> (8u * (si % 4u) + 8u)) & 0xffu;
    let d0 = dd.x * f32(sa & 15u);
    let m0 = dd.y * f32(sa >> 4u);
    let d1 = dd.x * f32(sb & 15u);
    let m1 = dd.y * f32(sb >> 4u);
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        let qw = ww(k, base + 4u + 8u * n + i);
        let q = vec4<f32>((vec4<u32>(qw, qw >> 8u, qw >> 16u, qw >> 24u) >> vec4<u32>(2u * j)) & vec4<u32>(3u));
        r[i] = select(q * d0 - m0, q * d1 - m1, i >= 4u);
    }
    return r;
}
