// matmul.wgsl - Y = X W^T for prompt processing (many tokens).
// Register-blocked: each of the 64 invocations computes 4 rows x 4 tokens,
// so a workgroup covers a 32 x 32 tile; each weight group is decoded once
// (w_group) and used for 4 tokens, and no tile goes through workgroup memory
// (slow on CPU adapters). With
// HAS_NORM the 32 tokens' RMS scales are computed once per workgroup.
// Grid: (ceil(m / 32), ceil(n / 32), NW), or NW = 1 for SWIGLU. Tier: all.
// WG must be 64 here.

var<workgroup> tok_scale: array<f32, 32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    KERNEL_INIT
    let k = wid.z;
    let M = P.m[k];
    let rbase = wid.x * 32u + (li % 8u) * 4u;
    let tbase = wid.y * 32u + (li / 8u) * 4u;
#ifdef HAS_NORM
    {
        let tok = wid.y * 32u + li / 2u;
        var ss = 0.0;
        if (tok < P.n) {
            let xb = P.x_off + tok * P.x_stride;
            for (var c = li % 2u; c < P.K; c += 2u) {
                let v = x[xb + c];
                ss += v * v;
            }
        }
        red[li] = ss;
        workgroupBarrier();
        if ((li % 2u) == 0u) { tok_scale[li / 2u] = inverseSqrt((red[li] + red[li + 1u]) / f32(P.K) + P.eps); }
        workgroupBarrier();
    }
#endif
    var acc: array<vec4<f32>, 4>;
#ifdef SWIGLU
    var acc2: array<vec4<f32>, 4>;
#endif
    for (var g = 0u; g < P.ngroups; g++) {
        for (var tm = 0u; tm < 4u; tm++) {
            let row = rbase + tm;
            if (row >= M) { continue; }
            let w = w_group(k, wrow(k, row), g);
#ifdef SWIGLU
            let u = w_group(1u, wrow(1u, row), g);
#endif
            for (var i = 0u; i < GV; i++) {
                let c = g * GROUP + i * 4u;
#ifdef HAS_NORM
                let nwv = nw4(c);
#endif
                for (var tn = 0u; tn < 4u; tn++) {
                    let tok = tbase + tn;
                    if (tok < P.n) {
#ifdef HAS_NORM
                        let xv = x4(P.x_off + tok * P.x_stride, c) * tok_scale[tok - wid.y * 32u] * nwv;
#else
                        let xv = x4(P.x_off + tok * P.x_stride, c);
#endif
                        acc[tn][tm] += dot(w[i], xv);
#ifdef SWIGLU
                        acc2[tn][tm] += dot(u[i], xv);
#endif
                    }
                }
            }
        }
    }
    for (var tn = 0u; tn < 4u; tn++) {
        let tok = tbase + tn;
        for (var tm = 0u; tm < 4u; tm++) {
            let row = rbase + tm;
            if (tok < P.n && row < M) {
#ifdef SWIGLU
                epilogue(k, tok, row, acc[tn][tm], acc2[tn][tm]);
#else
                epilogue(k, tok, row, acc[tn][tm], 0.0);
#endif
            }
        }
    }
}
