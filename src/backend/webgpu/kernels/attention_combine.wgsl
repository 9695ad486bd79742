// attention_combine.wgsl - merges the split-K partials of attention.wgsl:
// out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M), M = max_s m_s.
// Workgroup (h, t). Grid: (n_head, n, 1). Tier: all.

struct AttnParams {
    n_head: u32, n_kv: u32, hd: u32, n_splits: u32,
    q_off: u32, q_stride: u32, o_off: u32, o_stride: u32,
    chunk: u32, scale: f32, pad0: u32, pad1: u32,
}
@group(0) @binding(1) var<uniform> P: AttnParams;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    KERNEL_INIT
    let h = wid.x;
    let t = wid.y;
    let stride = P.hd + 2u;
    let base = (t * P.n_head + h) * P.n_splits * stride;
    var mx = -3.0e38;
    for (var s = 0u; s < P.n_splits; s++) { mx = max(mx, part[base + s * stride]); }
    var l = 0.0;
    for (var s = 0u; s < P.n_splits; s++) { l += part[base + s * stride + 1u] * exp(part[base + s * stride] - mx); }
    let ob = P.o_off + t * P.o_stride + h * P.hd;
    for (var d = li; d < P.hd; d += WG) {
        var a = 0.0;
        for (var s = 0u; s < P.n_splits; s++) {
            a += part[base + s * stride + 2u + d] * exp(part[base + s * stride] - mx);
        }
        o[ob + d] = a / l;
    }
}
