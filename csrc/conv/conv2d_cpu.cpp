#include <algorithm>
#include <vector>

#include "../common/parallel.hpp"
#include "conv2d.hpp"

namespace gpuopt::conv {

namespace {
// First and one-past-last output index o with 0 <= o*stride - pad + tap < extent,
// so the innermost loop runs without a bounds test.
inline void valid_range(std::int64_t tap, std::int64_t stride, std::int64_t pad, std::int64_t extent,
                        std::int64_t out_extent, std::int64_t* lo, std::int64_t* hi) {
    const std::int64_t first = pad - tap;                   // need o*stride >= first
    const std::int64_t last = extent - 1 + pad - tap;       // need o*stride <= last
    std::int64_t l = first <= 0 ? 0 : (first + stride - 1) / stride;
    std::int64_t h = last < 0 ? -1 : last / stride;
    *lo = std::max<std::int64_t>(l, 0);
    *hi = std::min<std::int64_t>(h + 1, out_extent);
}
}  // namespace

void conv2d_cpu(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s,
                Activation act) {
    s.validate();
    const std::int64_t P = s.P(), Q = s.Q();
    const std::int64_t N = s.N, K = s.K, H = s.H, W = s.W, R = s.R, S = s.S;
    const std::int64_t C = s.C, Cg = s.C / s.groups, Kg = s.K / s.groups;  // channels and maps a group

#pragma omp parallel
    {
        std::vector<double> acc(static_cast<std::size_t>(P * Q));
#pragma omp for collapse(2) schedule(static)
        for (std::int64_t n = 0; n < N; ++n) {
            for (std::int64_t k = 0; k < K; ++k) {
                std::fill(acc.begin(), acc.end(), bias ? static_cast<double>(bias[k]) : 0.0);
                const std::int64_t c0 = k / Kg * Cg;  // the first channel of map k's group
                for (std::int64_t cg = 0; cg < Cg; ++cg) {
                    const float* xc = x + (n * C + c0 + cg) * H * W;
                    const float* wkc = w + (k * Cg + cg) * R * S;
                    for (std::int64_t r = 0; r < R; ++r) {
                        const std::int64_t dr = r * s.dilation_h;  // the tap's row offset on the input
                        std::int64_t p_lo, p_hi;
                        valid_range(dr, s.stride_h, s.pad_h, H, P, &p_lo, &p_hi);
                        for (std::int64_t sx = 0; sx < S; ++sx) {
                            const std::int64_t ds = sx * s.dilation_w;
                            std::int64_t q_lo, q_hi;
                            valid_range(ds, s.stride_w, s.pad_w, W, Q, &q_lo, &q_hi);
                            const double wv = wkc[r * S + sx];
                            for (std::int64_t p = p_lo; p < p_hi; ++p) {
                                const float* xrow = xc + (p * s.stride_h - s.pad_h + dr) * W - s.pad_w + ds;
                                double* arow = acc.data() + p * Q;
                                for (std::int64_t q = q_lo; q < q_hi; ++q)
                                    arow[q] += wv * static_cast<double>(xrow[q * s.stride_w]);
                            }
                        }
                    }
                }
                float* yk = y + (n * K + k) * P * Q;
                for (std::int64_t i = 0; i < P * Q; ++i) yk[i] = static_cast<float>(apply_activation(acc[i], act));
            }
        }
    }
}

}  // namespace gpuopt::conv
