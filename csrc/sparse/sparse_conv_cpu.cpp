#include <algorithm>
#include <limits>
#include <vector>

#include "../common/error.hpp"
#include "sparse_conv.hpp"

namespace gpuopt::sparse {

bool sparse_conv_cpu(const std::int16_t* x, const std::int16_t* w, std::int32_t* y,
                     const SparseConvShape& s) {
    GPUOPT_REQUIRE(s.C > 0 && s.H > 1 && s.W > 1 && s.M > 0, "sparse_conv: C, M must be > 0 and H, W > 1");
    GPUOPT_REQUIRE(s.R > 0 && s.S > 0 && s.R % 2 == 1 && s.S % 2 == 1, "sparse_conv: filter sides must be odd");
    const std::int64_t C = s.C, H = s.H, W = s.W, M = s.M, R = s.R, S = s.S;
    const std::int64_t PH = s.out_h(), PW = s.out_w();
    const std::int64_t pad_h = R / 2, pad_w = S / 2;
    constexpr std::int64_t kMin = std::numeric_limits<std::int32_t>::min();
    constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
    bool fits = true;

#pragma omp parallel reduction(&& : fits)
    {
        std::vector<std::int64_t> acc(static_cast<std::size_t>(H * W));
#pragma omp for schedule(static)
        for (std::int64_t m = 0; m < M; ++m) {
            std::fill(acc.begin(), acc.end(), 0);
            for (std::int64_t c = 0; c < C; ++c) {
                const std::int16_t* xc = x + c * H * W;
                const std::int16_t* wmc = w + (m * C + c) * R * S;
                for (std::int64_t r = 0; r < R; ++r)
                    for (std::int64_t t = 0; t < S; ++t) {
                        const std::int64_t wv = wmc[r * S + t];
                        if (wv == 0) continue;  // the filters are sparse; skipping is exact
                        const std::int64_t dy = r - pad_h, dx = t - pad_w;
                        const std::int64_t h_lo = std::max<std::int64_t>(0, -dy), h_hi = std::min(H, H - dy);
                        const std::int64_t w_lo = std::max<std::int64_t>(0, -dx), w_hi = std::min(W, W - dx);
                        for (std::int64_t h = h_lo; h < h_hi; ++h) {
                            const std::int16_t* xrow = xc + (h + dy) * W + dx;
                            std::int64_t* arow = acc.data() + h * W;
                            for (std::int64_t ww = w_lo; ww < w_hi; ++ww) arow[ww] += wv * xrow[ww];
                        }
                    }
            }
            for (std::int64_t i = 0; i < H * W; ++i) fits = fits && acc[i] >= kMin && acc[i] <= kMax;
            std::int32_t* ym = y + m * PH * PW;
            for (std::int64_t ph = 0; ph < PH; ++ph)
                for (std::int64_t pw = 0; pw < PW; ++pw) {
                    const std::int64_t* a = acc.data() + (2 * ph) * W + 2 * pw;
                    const std::int64_t v = std::max(std::max(a[0], a[1]), std::max(a[W], a[W + 1]));
                    // ReLU then max pool == max pool then ReLU.
                    ym[ph * PW + pw] = static_cast<std::int32_t>(std::clamp<std::int64_t>(v, 0, kMax));
                }
        }
    }
    return fits;
}

}  // namespace gpuopt::sparse
