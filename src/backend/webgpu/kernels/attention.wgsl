// attention.wgsl - causal attention of one query head over the KV cache.
//
// Workgroup (h, t, s): query head h of token t (position S.pos + t) over
// cache rows [s * chunk, min((s + 1) * chunk, pos + 1)), WG rows at a time
// with an online softmax (running max m, running sum l, rescaled
// accumulator). With one split the normalized output is written; with more
// (decode at long context: split-K over the cache so that all of the GPU
// works on one token) each split writes (m, l, acc[hd]) to `part` and
// attention_combine.wgsl merges them. Grouped-query: head h reads KV head
// h / (n_head / n_kv). Grid: (n_head, n, n_splits). Tier: all; head size <= 4 * WG.

struct AttnParams {
    n_head: u32, n_kv: u32, hd: u32, n_splits: u32,
    q_off: u32, q_stride: u32, o_off: u32, o_stride: u32,
    chunk: u32, scale: f32, pad0: u32, pad1: u32,
}
@group(0) @binding(1) var<uniform> P: AttnParams;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<KVT>;
@group(0) @binding(4) var<storage, read> vc: array<KVT>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;

var<workgroup> qs: array<f32, 256>;
var<workgroup> ps: array<f32, WG>;

const NEG: f32 = -3.0e38;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
    let h = wid.x;
    let t = wid.y;
    let s = wid.z;
    let g = h / (P.n_head / P.n_kv);
    let len = S.pos + t + 1u;
    let j_begin = s * P.chunk;
    let j_end = min(len, j_begin + P.chunk);
    let qb = P.q_off + t * P.q_stride + h * P.hd;
    for (var d = li; d < P.hd; d += WG) { qs[d] = q[qb + d]; }
    workgroupBarrier();
    let kvs = P.n_kv * P.hd;
    let gb = g * P.hd;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, 4>;
    for (var j0 = j_begin; j0 < j_end; j0 += WG) {
        let j = j0 + li;
        var sc = NEG;
        if (j < j_end) {
            var dt = 0.0;
            let kb = j * kvs + gb;
            for (var d = 0u; d < P.hd; d++) { dt += qs[d] * f32(kc[kb + d]); }
            sc = dt * P.scale;
        }
        let m_new = max(m, wg_max(sc, li));
        var p = 0.0;
        if (j < j_end) { p = exp(sc - m_new); }
        ps[li] = p;
        let corr = exp(m - m_new);
        l = l * corr + wg_sum(p, li);
        m = m_new;
        let cnt = min(WG, j_end - j0);
        for (var e = 0u; e < 4u; e++) {
            let d = li + e * WG;
            if (d < P.hd) {
                var a = acc[e] * corr;
                for (var jj = 0u; jj < cnt; jj++) { a += ps[jj] * f32(vc[(j0 + jj) * kvs + gb + d]); }
                acc[e] = a;
            }
        }
        workgroupBarrier();
    }
    if (P.n_splits == 1u) {
        let ob = P.o_off + t * P.o_stride + h * P.hd;
        for (var e = 0u; e < 4u; e++) {
            let d = li + e * WG;
            if (d < P.hd) { o[ob + d] = acc[e] / l; }
        }
    } else {
        let pb = ((t * P.n_head + h) * P.n_splits + s) * (P.hd + 2u);
        if (li == 0u) {
            part[pb] = m;
            part[pb + 1u] = l;
        }
        for (var e = 0u; e < 4u; e++) {
            let d = li + e * WG;
            if (d < P.hd) { part[pb + 2u + d] = acc[e]; }
        }
    }
}
