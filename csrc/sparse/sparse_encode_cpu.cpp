// Dense filters to the NCTU lab's COO lists in two parallel passes (count, then fill): the encoding a user
// pays when handing dense filters to the sparse layer (NumPy's mask-and-nonzero took tens of ms at the lab's
// 512 x 512 x 3 x 3).
#include <vector>

#include "sparse_conv.hpp"

namespace gpuopt::sparse {

void count_nonzeros(const std::int16_t* w, std::int64_t slices, std::int64_t taps, std::int32_t* nnz) {
#pragma omp parallel for schedule(static)
    for (std::int64_t sl = 0; sl < slices; ++sl) {
        const std::int16_t* t = w + sl * taps;
        std::int32_t n = 0;
        for (std::int64_t i = 0; i < taps; ++i) n += t[i] != 0;
        nnz[sl] = n;
    }
}

void fill_coo(const std::int16_t* w, std::int64_t slices, std::int64_t taps, std::int64_t S, const std::int32_t* nnz,
              std::int16_t* data, std::int16_t* row, std::int16_t* col) {
    std::vector<std::int64_t> offset(static_cast<std::size_t>(slices) + 1, 0);
    for (std::int64_t sl = 0; sl < slices; ++sl) offset[sl + 1] = offset[sl] + nnz[sl];
#pragma omp parallel for schedule(static)
    for (std::int64_t sl = 0; sl < slices; ++sl) {
        const std::int16_t* t = w + sl * taps;
        std::int64_t at = offset[sl];
        for (std::int64_t i = 0; i < taps; ++i) {
            if (t[i] == 0) continue;
            data[at] = t[i];
            row[at] = static_cast<std::int16_t>(i / S);
            col[at] = static_cast<std::int16_t>(i % S);
            ++at;
        }
    }
}

}  // namespace gpuopt::sparse
