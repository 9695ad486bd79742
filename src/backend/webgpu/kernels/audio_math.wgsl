// audio_math.wgsl - the functions of the audio kernels (lstm, spectral, nsf;
// composed before them by wg_compose.c), with their own range reductions:
// WGSL allows the adapters' sin, cos and atan2 errors of 1e-4 and more, and
// a tanh that overflows. Tier: all.

// tanh without overflow: |error| < 1e-7.
fn tanh_a(t: f32) -> f32 {
    let e = exp(-2.0 * abs(t));
    return sign(t) * (1.0 - e) / (1.0 + e);
}

// 1 / (1 + exp(-t)) without overflow.
fn sigmoid_a(t: f32) -> f32 {
    let e = exp(-abs(t));
    let s = 1.0 / (1.0 + e);
    return select(e * s, s, t >= 0.0);
}

// (cos, sin) of r in [-pi/4, pi/4] (Taylor series; errors below 1e-8 there).
fn cossin_poly(r: f32) -> vec2<f32> {
    let u = r * r;
    var s = 2.7557319223985893e-6;
    s = s * u - 0.0001984126984126984;
    s = s * u + 0.008333333333333333;
    s = s * u - 0.16666666666666666;
    var c = -2.755731922398589e-7;
    c = c * u + 2.48015873015873e-5;
    c = c * u - 0.001388888888888889;
    c = c * u + 0.041666666666666664;
    c = c * u - 0.5;
    return vec2<f32>(1.0 + u * c, r + r * u * s);
}

// (cos, sin) of any t: t = k pi/2 + r, pi/2 split in three (8 and 12
// significant bits, so that k times the first two is exact for |k| < 4096),
// then the series on |r| <= pi/4 by k mod 4 (as unary.wgsl's sin:
// |error| <= 1e-7 on [-2000, 2000]).
fn cossin_a(t: f32) -> vec2<f32> {
    let k = round(t * 0.6366197723675813);
    let r = ((t - k * 1.5703125) - k * 0.0004838705062866211) + k * 4.371138828673793e-8;
    let cs = cossin_poly(r);
    let q = u32(i32(k)) & 3u;
    // sin(r + q pi/2): s, c, -s, -c; cos(r + q pi/2): c, -s, -c, s
    let odd = (q & 1u) != 0u;
    var s = select(cs.y, cs.x, odd);
    var c = select(cs.x, cs.y, odd);
    if ((q & 2u) != 0u) { s = -s; }
    if (((q + 1u) & 2u) != 0u) { c = -c; }
    return vec2<f32>(c, s);
}

// (cos, sin) of 2 pi idx / n for idx < n (n < 2^28): the angle reduced to
// [0, pi/4] exactly, in integers (units of 1/(8n) turn), then the series.
// Exact at the multiples of a quarter turn.
fn twiddle(idx: u32, n: u32) -> vec2<f32> {
    var j = 8u * idx;
    var neg_s = false;
    var neg_c = false;
    var swap = false;
    if (j > 4u * n) { j = 8u * n - j; neg_s = true; } // 2 pi - a
    if (j > 2u * n) { j = 4u * n - j; neg_c = true; } // pi - a
    if (j > n) { j = 2u * n - j; swap = true; }       // pi/2 - a
    let cs = cossin_poly(f32(j) * (0.7853981633974483 / f32(n)));
    var r = select(cs, cs.yx, swap);
    if (neg_c) { r.x = -r.x; }
    if (neg_s) { r.y = -r.y; }
    return r;
}

// (cos, sin) of 2 pi j / 2^32: a phase in fixed point, reduced the same way.
fn turn_cossin(jj: u32) -> vec2<f32> {
    var j = jj;
    var neg_s = false;
    var neg_c = false;
    var swap = false;
    if (j > 0x80000000u) { j = 0u - j; neg_s = true; }
    if (j > 0x40000000u) { j = 0x80000000u - j; neg_c = true; }
    if (j > 0x20000000u) { j = 0x40000000u - j; swap = true; }
    let cs = cossin_poly(f32(j) * 1.4629180792671596e-9); // 2 pi / 2^32
    var r = select(cs, cs.yx, swap);
    if (neg_c) { r.x = -r.x; }
    if (neg_s) { r.y = -r.y; }
    return r;
}

// atan of t in [0, 1] (Cephes' atanf: reduced to |x| <= tan(pi/8), then a
// polynomial; relative error about 2e-7).
fn atan_01(t: f32) -> f32 {
    var base = 0.0;
    var x = t;
    if (t > 0.41421356237309503) {
        base = 0.7853981633974483;
        x = (t - 1.0) / (t + 1.0);
    }
    let z = x * x;
    return base + ((((0.0805374449538 * z - 0.138776856032) * z + 0.199777106478) * z - 0.333329491539) * z * x + x);
}

// atan2(y, x) in (-pi, pi] for (x, y) != (0, 0), never dividing by zero.
fn atan2_a(y: f32, x: f32) -> f32 {
    let ax = abs(x);
    let ay = abs(y);
    var a = atan_01(min(ax, ay) / max(ax, ay));
    if (ay > ax) { a = 1.5707963267948966 - a; }
    if (x < 0.0) { a = 3.141592653589793 - a; }
    return select(a, -a, y < 0.0);
}
