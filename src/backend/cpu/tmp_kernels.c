/* TEMPORARY scalar F32/F16 kernels until the real kernels land. */
#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant.h"
#include <string.h>
static void prep_f32(const float *x, void *d, int64_t n) { memcpy(d, x, (size_t)n * 4); }
static float dot_f32(int64_t n, const void *w, const void *x) {
    const float *a = w, *b = x; float s = 0; for (int64_t i = 0; i < n; i++) s += a[i] * b[i]; return s; }
static float dot_f16(int64_t n, const void *w, const void *x) {
    const uint16_t *a = w; const float *b = x; float s = 0; for (int64_t i = 0; i < n; i++) s += wgml_f16_to_f32(a[i]) * b[i]; return s; }
static void tf_f32(const void *s, float *d, int64_t n) { memcpy(d, s, (size_t)n * 4); }
static void tf_f16(const void *s, float *d, int64_t n) { const uint16_t *a = s; for (int64_t i = 0; i < n; i++) d[i] = wgml_f16_to_f32(a[i]); }
static const cpu_type_kernels kf32 = {WGML_F32, prep_f32, dot_f32, tf_f32};
static const cpu_type_kernels kf16 = {WGML_F32, prep_f32, dot_f16, tf_f16};
const cpu_type_kernels *cpu_kernels_get(uint32_t t) { return t == WGML_F32 ? &kf32 : t == WGML_F16 ? &kf16 : NULL; }
const char *cpu_kernels_isa(void) { return "scalar"; }
void cpu_kernels_force_scalar(int on) { (void)on; }
int wgml_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const cpu_type_kernels *k = cpu_kernels_get(type); if (!k) return -1; k->to_float(src, dst, n); return 0; }
size_t wgml_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    if (type == WGML_F32) { memcpy(dst, src, (size_t)n * 4); return (size_t)n * 4; }
    if (type == WGML_F16) { uint16_t *d = dst; for (int64_t i = 0; i < n; i++) d[i] = wgml_f32_to_f16(src[i]); return (size_t)n * 2; }
    return 0; }
int wgml_can_quantize(uint32_t type) { return type == WGML_F32 || type == WGML_F16; }
