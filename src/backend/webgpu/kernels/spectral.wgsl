// spectral.wgsl - the short-time Fourier transform and its inverse (ops.h,
// wg_ops_audio.c), direct sums as the CPU's reference (n_fft is small in
// the vocoders: no FFT):
//   STFT   one invocation per (frame f, bin k), i = f * B + k: the frame's
//          samples f*hop - N/2 + n of x reflect-padded, times the window w,
//          summed against e^(-2 pi i k n / N); o[f][k] = |X|, o[f][B + k] =
//          its phase, canonical (0 or pi) where X is real in exact arithmetic
//          (bins 0 and N/2, every bin of a frame centred on the first or the
//          last sample: reflected about it, it is even about n = N/2);
//   ISTFT  one invocation per output sample i: at p = i + N/2 of the padded
//          signal, the sum over the frames f covering p (f*hop <= p <
//          f*hop + N, at most ceil(N / hop)) of frame f's real inverse DFT at
//          n = p - f*hop times w[n], divided by the sum of w[n]^2 (when above
//          1e-11).
// The twiddles are cos and sin of 2 pi ((k n) mod N) / N, reduced exactly in
// integers (twiddle(), audio_math.wgsl). Grid: P.rows rows of P.cols (x:
// columns; rows over y and z, row = gid.z * 65535 + gid.y), element i =
// row * cols + column < n. Inputs in o's buffer (apart from the output) are
// read through o: X_IS_OUT (STFT's x, out_x.wgsl), W_IS_OUT (the window),
// MAG_IS_OUT, PH_IS_OUT (ISTFT's magnitude and phase). Tier: all.

struct SpecParams {
    n: u32, x_off: u32, o_off: u32, cols: u32,
    rows: u32, N: u32, hop: u32, B: u32,
    L: u32, F: u32, w_off: u32, ph_off: u32,
}
@group(0) @binding(1) var<uniform> P: SpecParams;
#ifdef ISTFT
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
#ifdef MAG_IS_OUT
fn magv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(2) var<storage, read> mag: array<f32>;
fn magv(i: u32) -> f32 { return mag[i]; }
#endif
#ifdef PH_IS_OUT
fn phv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(5) var<storage, read> phase: array<f32>;
fn phv(i: u32) -> f32 { return phase[i]; }
#endif
#endif
#ifdef W_IS_OUT
fn wv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(4) var<storage, read> win: array<f32>;
fn wv(i: u32) -> f32 { return win[i]; }
#endif

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let row = gid.z * 65535u + gid.y;
    let i = row * P.cols + gid.x;
    if (gid.x >= P.cols || row >= P.rows || i >= P.n) { return; }
    let half = P.N / 2u;
#ifdef STFT
    // P.x_off: x; P.L: its samples
    let k = i % P.B;
    let f = i / P.B;
    let L = i32(P.L);
    let start = i32(f * P.hop) - i32(half);
    var re = 0.0;
    var im = 0.0;
    var idx = 0u; // (k n) mod N
    for (var n = 0u; n < P.N; n++) {
        var s = start + i32(n);
        if (s < 0) { s = -s; }                // reflect at both ends
        if (s >= L) { s = 2 * (L - 1) - s; }
        let v = xv(P.x_off + u32(s)) * wv(P.w_off + n);
        let cs = twiddle(idx, P.N);
        re += v * cs.x;
        im -= v * cs.y;
        idx += k;
        if (idx >= P.N) { idx -= P.N; }
    }
    if (k == 0u || k == half || f == 0u || i32(f * P.hop) == L - 1) { im = 0.0; }
    var ph = 0.0;
    if (im != 0.0) {
        ph = atan2_a(im, re);
    } else if (re < 0.0) {
        ph = 3.141592653589793;
    }
    let ob = P.o_off + f * 2u * P.B;
    o[ob + k] = sqrt(re * re + im * im);
    o[ob + P.B + k] = ph;
#endif
#ifdef ISTFT
    // P.x_off: the magnitudes [F][B]; P.ph_off: the phases
    let p = i + half;
    let f_hi = min(p / P.hop, P.F - 1u);
    var f_lo = 0u;
    if (p >= P.N) { f_lo = (p - P.N) / P.hop + 1u; }
    let inv_n = 1.0 / f32(P.N);
    var acc = 0.0;
    var ws = 0.0;
    for (var f = f_lo; f <= f_hi; f++) {
        let n = p - f * P.hop;
        let mb = P.x_off + f * P.B;
        let pb = P.ph_off + f * P.B;
        // bins 0 and N/2 once (their real parts), the others twice
        var v = magv(mb) * cossin_a(phv(pb)).x +
                select(1.0, -1.0, (n & 1u) != 0u) * magv(mb + half) * cossin_a(phv(pb + half)).x;
        var idx = n; // (k n) mod N
        for (var k = 1u; k < half; k++) {
            let m = magv(mb + k);
            let cp = cossin_a(phv(pb + k));
            let tw = twiddle(idx, P.N);
            v += 2.0 * (m * cp.x * tw.x - m * cp.y * tw.y);
            idx += n;
            if (idx >= P.N) { idx -= P.N; }
        }
        let wn = wv(P.w_off + n);
        acc += v * inv_n * wn;
        ws += wn * wn;
    }
    o[P.o_off + i] = select(acc, acc / ws, ws > 1e-11);
#endif
}
