// One rank's share of a k-means run split over ranks: kmeans_cuda.hpp says what each step computes and why the
// bits are one process's. The assignment and chunk sums are the single-GPU loops' own kernels (kmeans_device.cu
// through kmeans_loop_parts.hpp, kmeans_tiled.cu through tiled::launch); this file adds the two halves of
// finish_loop that the exchange sits between.
#include <algorithm>
#include <cstring>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/device_buffer.cuh"
#include "../common/error.hpp"
#include "../common/stream.hpp"
#include "kmeans_cuda.hpp"
#include "kmeans_device.cuh"
#include "kmeans_loop_parts.hpp"
#include "kmeans_tiled.hpp"

namespace gpuopt::kmeans::multi {

namespace {

constexpr int kSumThreads = 256;   // group_sums: an entry (cluster, coordinate) a thread
constexpr int kCloseWarps = 8;     // close_loop: a warp for 4 entries (1 where k*d is odd)
constexpr int kCloseRounds = 8;    // close_loop: rounds of 32 / Coords groups loaded before their adds (8: twice
                                   // the bytes in flight of 4, for a close that reads every slot at 0.07 ms)

// finish_loop's first level (group_sum) for `groups` groups (a shard's, or a slab's of it), written to out[g][e].
// Thread (e, g); the chunk rows are read along e, 256 bytes a warp. Where `tail` is given (the shard's last
// groups), block (0, 0) also moves the member counts and the change count there and zeroes them for the next loop
// (integers, exact as doubles below 2^53).
__global__ void __launch_bounds__(kSumThreads) group_sums(const double* __restrict__ chunk_sums, std::int64_t chunks,
                                                          int kd, int k, std::int64_t groups,
                                                          unsigned long long* __restrict__ counts,
                                                          LoopState* __restrict__ state, double* __restrict__ out,
                                                          double* __restrict__ tail) {
    if (state->done) return;
    if (tail && blockIdx.x == 0 && blockIdx.y == 0) {
        for (int c = threadIdx.x; c < k; c += blockDim.x) {
            tail[c] = static_cast<double>(counts[c]);
            counts[c] = 0;
        }
        if (threadIdx.x == 0) {
            tail[k] = static_cast<double>(state->changed);
            state->changed = 0;
        }
    }
    const int e = blockIdx.x * kSumThreads + threadIdx.x;
    if (e >= kd) return;
    for (std::int64_t g = blockIdx.y; g < groups; g += gridDim.y)
        out[g * kd + e] = group_sum(chunk_sums, g, chunks, kd, e);
}

// finish_loop's second level over every rank's slot: entry e's total = 0.0 + the group sums in global group order
// (rows: each global group's offset in `gathered`), the counts summed over ranks (integers), the mean rounded once;
// the last block closes the loop (delta of N, history, stop flag) exactly as finish_loop. Coords entries a warp,
// 32 / Coords groups a round (whole 32-byte sectors where Coords = 4), kCloseRounds rounds loaded before their adds.
template <int Coords>
__global__ void __launch_bounds__(kCloseWarps * 32) close_loop(const double* __restrict__ gathered,
                                                               const std::int64_t* __restrict__ rows,
                                                               std::int64_t groups, int ranks,
                                                               std::int64_t tail_stride, std::int64_t tail_base,
                                                               std::int64_t n_total, int d, int k,
                                                               float* __restrict__ centres, float threshold,
                                                               int max_iter, float* __restrict__ history,
                                                               LoopState* __restrict__ state) {
    if (state->done) return;  // read by every block before the last one can change it
    constexpr int kSlots = 32 / Coords;
    const int kd = k * d;
    const int lane = threadIdx.x % 32, sub = lane % Coords, slot_lane = lane / Coords;
    const int e0 = (blockIdx.x * kCloseWarps + threadIdx.x / 32) * Coords;  // warp-uniform (kd % Coords == 0)
    const int e = e0 + sub;
    if (e0 < kd) {
        double total = 0.0;
        for (std::int64_t g0 = 0; g0 < groups; g0 += kSlots * kCloseRounds) {
            double v[kCloseRounds];
#pragma unroll
            for (int r = 0; r < kCloseRounds; ++r) {
                const std::int64_t g = g0 + r * kSlots + slot_lane;
                v[r] = g < groups ? gathered[rows[g] + e] : 0.0;
            }
#pragma unroll
            for (int r = 0; r < kCloseRounds; ++r) {
                const std::int64_t base = g0 + r * kSlots;
                const int in_round = groups - base < kSlots ? static_cast<int>(groups - base) : kSlots;
                for (int s = 0; s < in_round; ++s) total += __shfl_sync(0xffffffffu, v[r], s * Coords + sub);
            }
        }
        if (slot_lane == 0) {
            double count = 0.0;
            for (int r = 0; r < ranks; ++r) count += gathered[tail_base + r * tail_stride + e / d];
            if (count > 0.0) centres[e] = close_mean(total, count, &state->nonfinite);
        }
    }
    if (!last_block(state) || threadIdx.x != 0) return;
    double changed = 0.0;
    for (int r = 0; r < ranks; ++r) changed += gathered[tail_base + r * tail_stride + k];
    record_loop(state, static_cast<unsigned long long>(changed), n_total, threshold, max_iter, history);
}

std::int64_t groups_of(std::int64_t rows) { return (rows + kSumGroup - 1) / kSumGroup; }

std::int64_t total_rows(const Layout& layout) {
    std::int64_t n = 0;
    for (int r : layout.order) n += layout.rows[static_cast<std::size_t>(r)];
    return n;
}

}  // namespace

std::int64_t slot_doubles(const Layout& layout, std::int64_t d, std::int64_t k) {
    return slot_layout(layout.rows, k, d).size;
}

void check(const Layout& layout, int rank, std::int64_t d, std::int64_t k, std::int64_t max_iter,
           const RankConfig& cfg) {
    const std::string what = "kmeans distributed";
    const auto ranks = static_cast<std::int64_t>(layout.rows.size());
    GPUOPT_REQUIRE(ranks >= 1 && rank >= 0 && rank < ranks, what + ": rank must be in 0..ranks-1");
    GPUOPT_REQUIRE(max_iter >= 1 && max_iter <= (1 << 30), what + ": max_iter must be in 1..2^30");
    std::vector<char> seen(layout.rows.size(), 0);
    const auto rows_of = [&](std::int64_t r) { return layout.rows[static_cast<std::size_t>(r)]; };
    for (int r : layout.order) {
        GPUOPT_REQUIRE(r >= 0 && r < ranks && !seen[static_cast<std::size_t>(r)] && rows_of(r) > 0,
                       what + ": the order must name each rank with rows once");
        seen[static_cast<std::size_t>(r)] = 1;
    }
    for (std::int64_t r = 0; r < ranks; ++r)
        GPUOPT_REQUIRE(rows_of(r) == 0 || seen[static_cast<std::size_t>(r)],
                       what + ": every rank with rows must be in the order");
    for (std::size_t i = 0; i + 1 < layout.order.size(); ++i)
        GPUOPT_REQUIRE(rows_of(layout.order[i]) % kSumGroup == 0,
                       what + ": every shard but the last must hold whole groups of " + std::to_string(kSumGroup) +
                           " rows");
    const std::int64_t n = total_rows(layout);
    // The loops' own limits, for the whole data (k <= N; a rank may hold fewer than k rows).
    switch (cfg.loop) {
        case Loop::Device: kmeans_device_check(n, d, k); break;
        case Loop::DeviceGemm: kmeans_device_gemm_check(n, d, k); break;
        case Loop::DeviceTiled: kmeans_device_tiled_check(n, d, k, cfg.products); break;
    }
    GPUOPT_REQUIRE(k * d <= (std::int64_t{1} << 31) - 1, what + ": k*D must fit 32-bit indexing");
}

struct Rank::Impl {
    const float* x;
    std::int64_t n, n_total, d, k, chunks, groups, groups_total;
    std::int64_t tail;  // the slot's counts start here: after groups_max rows of k*d group sums
    // Rank r's counts in the gathered slots: tail_base + r * tail_stride (the slot's tail, or part 1's).
    std::int64_t tail_base = 0, tail_stride = 0;
    int ranks;
    float threshold;
    std::int64_t max_iter;
    RankConfig cfg;
    float* centres;
    std::int32_t* membership;
    unsigned assign_blocks = 0;
    tiled::Launch tiled_plan;
    DeviceBuffer<double> chunk_sums;
    DeviceBuffer<unsigned long long> loop;  // [counts k][LoopState][history] (kmeans_loop_parts.hpp)
    DeviceBuffer<std::int64_t> rows;        // each global group's offset in the gathered slots
    DeviceBuffer<unsigned char> workspace;  // device_tiled's deep path
    std::vector<std::int64_t> rows_host;    // kept until the upload has run
    std::vector<unsigned char> host;        // the state and history, read back
    // Slabs: the shard in launches of slab_rows (streamed, or one a part). Streamed (cfg.stream_rows > 0): x in
    // host memory, two device slabs, a copy stream and its events.
    std::int64_t slab_rows = 0, slabs = 0, issued = 0, loops = 0;
    DeviceBuffer<float> slab;
    tiled::Launch last_plan;                // device_tiled's plan for the last (shorter) slab
    unsigned last_blocks = 0;
    cudaStream_t copy = nullptr;
    cudaEvent_t ready[2] = {}, free[2] = {};
    void* registered = nullptr;
    cudaStream_t side = nullptr;  // parts = 2: the first part's exchange is queued here, beside the loop's stream

    ~Impl() {
        if (side) {  // no exchange in flight from our buffers
            cudaStreamSynchronize(side);
            cudaStreamDestroy(side);
        }
        if (copy) cudaStreamSynchronize(copy);  // no copy in flight into a freed slab or from unregistered memory
        for (cudaEvent_t e : {ready[0], ready[1], free[0], free[1]})
            if (e) cudaEventDestroy(e);
        if (copy) cudaStreamDestroy(copy);
        if (registered) cudaHostUnregister(registered);
    }

    unsigned long long* counts() const { return loop.data(); }
    LoopState* state() const { return static_cast<LoopState*>(parts::state_of(loop.data(), k)); }
};

Rank::Rank(const float* x, const Layout& layout, int rank, std::int64_t d, std::int64_t k, float threshold,
           std::int64_t max_iter, const RankConfig& cfg, float* centres, std::int32_t* membership)
    : impl_(std::make_unique<Impl>()) {
    check(layout, rank, d, k, max_iter, cfg);
    Impl& m = *impl_;
    m.n = layout.rows[static_cast<std::size_t>(rank)];
    GPUOPT_REQUIRE(m.n == 0 || (x && membership), "kmeans distributed: null pointer argument");
    GPUOPT_REQUIRE(centres, "kmeans distributed: null centres");
    m.x = x, m.n_total = total_rows(layout), m.d = d, m.k = k, m.threshold = threshold, m.max_iter = max_iter;
    m.cfg = cfg, m.centres = centres, m.membership = membership;
    m.chunks = (m.n + kChunk - 1) / kChunk;
    m.groups = groups_of(m.n);
    const SlotLayout slots = slot_layout(layout.rows, k, d);
    slot_ = slots.size;
    m.tail = slots.tail;
    const std::int64_t kd = k * d;
    m.ranks = static_cast<int>(layout.rows.size());
    GPUOPT_REQUIRE(cfg.stream_rows >= 0 && cfg.stream_rows % kSumGroup == 0,
                   "kmeans distributed: stream_rows must be 0 or a multiple of " + std::to_string(kSumGroup));
    GPUOPT_REQUIRE(cfg.parts == 1 || (cfg.parts == 2 && cfg.stream_rows == 0),
                   "kmeans distributed: parts must be 1, or 2 for a shard on the device");
    // Part 0: groups [0, h) of every rank's slot (all of them with one part); part 1: the last quarter and the
    // counts. Part 1's local pass (a quarter of the work) hides part 0's all-gather (three quarters of the bytes);
    // what is left in the open is part 1's, a quarter.
    const std::int64_t groups_max = slots.tail / kd;
    const std::int64_t h = cfg.parts == 2 ? std::max<std::int64_t>(1, groups_max - (groups_max + 3) / 4) : groups_max;
    part0_ = cfg.parts == 2 ? h * kd : slot_;
    const std::int64_t part1 = slot_ - part0_;
    for (int r : layout.order)
        for (std::int64_t g = 0; g < groups_of(layout.rows[static_cast<std::size_t>(r)]); ++g)
            m.rows_host.push_back(g < h ? r * part0_ + g * kd : m.ranks * part0_ + r * part1 + (g - h) * kd);
    m.groups_total = static_cast<std::int64_t>(m.rows_host.size());
    m.tail_base = cfg.parts == 2 ? m.ranks * part0_ + (m.tail - part0_) : m.tail;
    m.tail_stride = cfg.parts == 2 ? part1 : slot_;
    // The rows one launch of the assignment covers: the shard, or a slab of it (no larger than the shard): a
    // streamed slab, or a part's groups.
    const std::int64_t slab_cap = cfg.stream_rows > 0 ? cfg.stream_rows : cfg.parts == 2 ? h * kSumGroup : 0;
    m.slab_rows = slab_cap > 0 ? std::min(slab_cap, groups_of(m.n) * kSumGroup) : m.n;
    m.slabs = m.slab_rows > 0 ? (m.n + m.slab_rows - 1) / m.slab_rows : 0;
    const std::int64_t last_rows = m.n - (m.slabs - 1) * m.slab_rows;
    const std::int64_t launch_chunks = (m.slab_rows + kChunk - 1) / kChunk;
    if (m.n > 0) {
        auto blocks_for = [&](std::int64_t rows) {
            const unsigned b = parts::assign_grid((rows + kChunk - 1) / kChunk, d, k, cfg.loop == Loop::DeviceGemm);
            return cfg.blocks > 0 ? std::min(b, static_cast<unsigned>(cfg.blocks)) : b;
        };
        if (cfg.loop == Loop::DeviceTiled) {
            m.tiled_plan = tiled::plan(m.slab_rows, d, k, cfg.blocks, cfg.products);
            m.last_plan = tiled::plan(last_rows, d, k, cfg.blocks, cfg.products);
            m.workspace = DeviceBuffer<unsigned char>(m.tiled_plan.workspace_bytes);
        } else {
            m.assign_blocks = blocks_for(m.slab_rows);
            m.last_blocks = blocks_for(last_rows);
        }
    }
    m.chunk_sums = DeviceBuffer<double>(static_cast<std::size_t>(launch_chunks * kd));
    if (cfg.stream_rows > 0 && m.n > 0) {
        m.slab = DeviceBuffer<float>(static_cast<std::size_t>(2 * m.slab_rows * d));
        cudaPointerAttributes attr{};
        GPUOPT_CUDA_CHECK(cudaPointerGetAttributes(&attr, x));
        GPUOPT_REQUIRE(attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged,
                       "kmeans distributed: a streamed shard is host memory (device memory needs no streaming)");
        if (attr.type == cudaMemoryTypeUnregistered) {
            const std::size_t bytes = static_cast<std::size_t>(m.n * d) * sizeof(float);
            const cudaError_t err = cudaHostRegister(const_cast<float*>(x), bytes, cudaHostRegisterDefault);
            if (err != cudaSuccess) {
                cudaGetLastError();
                GPUOPT_REQUIRE(false, std::string("kmeans distributed: could not page-lock the streamed shard (") +
                                          cudaGetErrorString(err) + "); pass pinned host memory");
            }
            m.registered = const_cast<float*>(x);
        }
        GPUOPT_CUDA_CHECK(cudaStreamCreateWithFlags(&m.copy, cudaStreamNonBlocking));
        for (int b = 0; b < 2; ++b) {
            GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&m.ready[b], cudaEventDisableTiming));
            GPUOPT_CUDA_CHECK(cudaEventCreateWithFlags(&m.free[b], cudaEventDisableTiming));
        }
    }
    if (cfg.parts == 2) GPUOPT_CUDA_CHECK(cudaStreamCreateWithFlags(&m.side, cudaStreamNonBlocking));
    m.loop = DeviceBuffer<unsigned long long>(parts::loop_words(k, max_iter));
    m.rows = DeviceBuffer<std::int64_t>(m.rows_host.size());
    m.host.resize(parts::state_bytes(max_iter));
    const cudaStream_t s = current_stream();
    GPUOPT_CUDA_CHECK(cudaMemcpyAsync(m.rows.data(), m.rows_host.data(), m.rows_host.size() * sizeof(std::int64_t),
                                      cudaMemcpyHostToDevice, s));
    GPUOPT_CUDA_CHECK(cudaMemsetAsync(m.loop.data(), 0, parts::head_words(k) * sizeof(unsigned long long), s));
    if (m.n > 0)
        GPUOPT_CUDA_CHECK(cudaMemsetAsync(membership, 0xFF, static_cast<std::size_t>(m.n) * sizeof(std::int32_t), s));
    GPUOPT_CUDA_CHECK(cudaStreamSynchronize(s));  // rows_host may go; a failure shows here, not in the loop
}

Rank::~Rank() = default;

std::uintptr_t Rank::side_stream() const { return reinterpret_cast<std::uintptr_t>(impl_->side); }

void Rank::local(double* slot, int part) {
    Impl& m = *impl_;
    GPUOPT_REQUIRE(slot, "kmeans distributed: null slot");
    GPUOPT_REQUIRE(part >= 0 && part < m.cfg.parts, "kmeans distributed: part must be in 0..parts-1");
    const int kd = static_cast<int>(m.k * m.d);
    const cudaStream_t on = current_stream();
    // group_sums over `rows` objects' chunk sums into out (their groups' rows of the slot); tail: the shard's end.
    auto group_sums_of = [&](std::int64_t rows, double* out, double* tail) {
        const std::int64_t chunks = (rows + kChunk - 1) / kChunk, groups = groups_of(rows);
        const dim3 grid(static_cast<unsigned>((kd + kSumThreads - 1) / kSumThreads),
                        static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(groups, 65535))));
        group_sums<<<grid, kSumThreads, 0, on>>>(m.chunk_sums.data(), chunks, kd, static_cast<int>(m.k), groups,
                                                 m.counts(), m.state(), out, tail);
        GPUOPT_CHECK_LAUNCH("kmeans distributed group_sums");
    };
    // Streamed: slab g of the run (over all loops) into device slab g % 2, after the kernels of slab g - 2.
    auto issue_copy = [&](std::int64_t g) {
        const int b = static_cast<int>(g % 2);
        const std::int64_t first = (g % m.slabs) * m.slab_rows, len = std::min(m.slab_rows, m.n - first);
        if (g >= 2) GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(m.copy, m.free[b], 0));
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(m.slab.data() + b * m.slab_rows * m.d, m.x + first * m.d,
                                          static_cast<std::size_t>(len * m.d) * sizeof(float), cudaMemcpyHostToDevice,
                                          m.copy));
        GPUOPT_CUDA_CHECK(cudaEventRecord(m.ready[b], m.copy));
    };
    const std::int64_t groups_per_slab = m.slab_rows / kSumGroup;  // whole groups but in the shard's last slab
    // One part: every slab. Two: slab `part` (a part's groups; a shard within part 0 has no slab 1).
    const bool last_part = part == m.cfg.parts - 1;
    const std::int64_t s0 = m.cfg.parts == 1 ? 0 : part, s1 = m.cfg.parts == 1 ? m.slabs : std::min(m.slabs, s0 + 1);
    for (std::int64_t s = s0; s < s1; ++s) {
        const bool last = s == m.slabs - 1;
        const std::int64_t first = s * m.slab_rows, len = std::min(m.slab_rows, m.n - first);
        const std::int64_t g = m.loops * m.slabs + s;  // this slab over all loops
        const float* xs = m.x + first * m.d;
        if (m.copy) {
            while (m.issued < g + 2) issue_copy(m.issued++);  // one slab ahead, across the loop's end too
            GPUOPT_CUDA_CHECK(cudaStreamWaitEvent(on, m.ready[g % 2], 0));
            xs = m.slab.data() + (g % 2) * m.slab_rows * m.d;
        }
        if (m.cfg.loop == Loop::DeviceTiled)
            tiled::launch(last ? m.last_plan : m.tiled_plan, xs, len, m.d, m.k, m.centres, m.membership + first,
                          m.chunk_sums.data(), m.counts(), m.state(), m.workspace.data());
        else
            parts::launch_assign(xs, len, m.d, m.k, m.cfg.loop == Loop::DeviceGemm,
                                 last ? m.last_blocks : m.assign_blocks, m.centres, m.membership + first,
                                 m.chunk_sums.data(), m.loop.data(), on);
        group_sums_of(len, slot + s * groups_per_slab * kd, last ? slot + m.tail : nullptr);
        if (m.copy) GPUOPT_CUDA_CHECK(cudaEventRecord(m.free[g % 2], on));
    }
    if (m.slabs == 0 && last_part) group_sums_of(0, slot, slot + m.tail);  // a rank without rows: counts, all 0
    if (last_part) m.loops += 1;
}

void Rank::close(const double* gathered) {
    Impl& m = *impl_;
    GPUOPT_REQUIRE(gathered, "kmeans distributed: null gathered slots");
    const int kd = static_cast<int>(m.k * m.d);
    auto* history = reinterpret_cast<float*>(m.state() + 1);
    const auto launch = [&](auto kernel, int coords) {
        const auto blocks = static_cast<unsigned>((kd / coords + kCloseWarps - 1) / kCloseWarps);
        kernel<<<blocks, kCloseWarps * 32, 0, current_stream()>>>(
            gathered, m.rows.data(), m.groups_total, m.ranks, m.tail_stride, m.tail_base, m.n_total,
            static_cast<int>(m.d), static_cast<int>(m.k), m.centres, m.threshold, static_cast<int>(m.max_iter),
            history, m.state());
        GPUOPT_CHECK_LAUNCH("kmeans distributed close_loop");
    };
    if (kd % 4 == 0) launch(close_loop<4>, 4);
    else launch(close_loop<1>, 1);
}

bool Rank::read(int* iterations, std::vector<float>* delta) {
    Impl& m = *impl_;
    copy_to_host_sync(m.host.data(), m.state(), m.host.size());
    const bool done = parts::copy_done(m.host.data(), iterations);
    if (delta) {
        const float* h = parts::copy_history(m.host.data());
        delta->assign(h, h + *iterations);
    }
    return done;
}

}  // namespace gpuopt::kmeans::multi
