#include <algorithm>
#include <string>

#include "../kmeans/kmeans_cuda.hpp"
#include "array_util.hpp"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

// The one argument struct of the k-means loop launchers, kmeans_<variant>(args, *, <parameters>) (device,
// device_fused, device_gemm, device_tiled, device_persistent, stream): the objects x (N, D) float32 (a device
// address; stream also takes host memory), the centres (k, D) float32 on the device (the initial centres in,
// the result out) and the memberships (N,) int32 on the device, the sizes and the stop rule. Liao's ladder steps
// keep the report program's arguments (x on both sides, the initial centres and the result on the host).
struct KMeansArgs {
    std::uintptr_t x = 0, centroids = 0, membership = 0;
    std::int64_t n = 0, d = 0, k = 0;
    float threshold = 0.f;
    std::int64_t max_iter = 0;

    const float* px() const { return dptr<const float>(x); }
    float* pc() const { return dptr<float>(centroids); }
    std::int32_t* pm() const { return dptr<std::int32_t>(membership); }
};

namespace {

// A run's delta history as a NumPy float32 array (the loop launchers' second result).
carray<float> delta_array(const kmeans::KMeansStats& stats) {
    carray<float> delta(static_cast<py::ssize_t>(stats.delta.size()));
    std::copy(stats.delta.begin(), stats.delta.end(), delta.mutable_data());
    return delta;
}

// kmeans_liao(x_dev_ptr, x_host, init, threshold, max_iter, threads, timing=True)
//   -> (centroids (k, D) float32, membership (N,) int32, iterations, delta (iterations,)
//       float32, timing dict)
// x_dev_ptr: device address of the (N, D) float32 objects; x_host: the same objects on
// the host (C-contiguous float32), used for the centre update. The dict holds the loop's
// phase totals in ms (loop_h2d_ms, loop_kernels_ms, loop_d2h_ms, transpose_ms), empty
// when timing is False.
py::tuple kmeans_liao_py(std::uintptr_t x_dev, const carray<float>& x_host, const carray<float>& init, float threshold,
                         std::int64_t max_iter, const kmeans::LiaoConfig& cfg, bool timing) {
    const auto xs = shape_of(x_host, 2, "x_host");
    const auto is = shape_of(init, 2, "init");
    GPUOPT_REQUIRE(is[1] == xs[1], "init must have as many coordinates as x");
    GPUOPT_REQUIRE(x_dev != 0, "x_dev_ptr must be a device address, got 0");
    auto centroids = empty<float>({is[0], is[1]});
    std::copy(init.data(), init.data() + init.size(), centroids.mutable_data());
    auto membership = empty<std::int32_t>({xs[0]});
    kmeans::KMeansStats stats;
    kmeans::KMeansLiaoTiming phases;
    {
        py::gil_scoped_release release;
        stats = kmeans::kmeans_liao(dptr<const float>(x_dev), x_host.data(), xs[0], xs[1], is[0], threshold, max_iter,
                                    centroids.mutable_data(), membership.mutable_data(), cfg,
                                    timing ? &phases : nullptr);
    }
    const carray<float> delta = delta_array(stats);
    py::dict times;
    if (timing) {
        times["loop_h2d_ms"] = phases.upload_ms;
        times["loop_kernels_ms"] = phases.kernels_ms;
        times["loop_d2h_ms"] = phases.download_ms;
        times["transpose_ms"] = phases.setup_ms;
    }
    return py::make_tuple(centroids, membership, stats.iterations, delta, times);
}

kmeans::LiaoConfig liao_config(int threads, int reduction_threads, bool aos, bool vector_loads) {
    kmeans::LiaoConfig cfg;
    cfg.threads = threads;
    cfg.reduction_threads = reduction_threads;
    cfg.aos = aos;
    cfg.vector_loads = vector_loads;
    return cfg;
}

kmeans::StreamConfig stream_config(std::int64_t chunk_points, int buffers, const std::string& host_memory,
                                   const std::string& assign) {
    // Through kmeans_choices.hpp's tables: host_memory index 1 is staged; assign's indices are StreamAssign's.
    kmeans::StreamConfig cfg;
    cfg.chunk_points = chunk_points;
    cfg.buffers = buffers;
    cfg.staged = choice_index(kmeans::kStreamHostMemory, host_memory, "kmeans stream") == 1;
    cfg.assign = choice<kmeans::StreamAssign>(kmeans::kStreamAssign, assign, "kmeans stream");
    return cfg;
}

// The loop launchers' own parameters (device, device_fused, device_gemm, device_tiled).
void check_loop_args(int loops_per_sync, int blocks) {
    GPUOPT_REQUIRE(loops_per_sync >= 1, "kmeans device: loops_per_sync must be >= 1");
    GPUOPT_REQUIRE(blocks >= 0, "kmeans device: blocks must be >= 0 (0: as many as are resident)");
}

kmeans::multi::RankConfig rank_config(const std::string& loop, const std::string& products, int blocks,
                                       std::int64_t stream_rows = 0, int parts = 1) {
    GPUOPT_REQUIRE(blocks >= 0, "kmeans distributed: blocks must be >= 0 (0: as many as are resident)");
    kmeans::multi::RankConfig cfg;
    cfg.stream_rows = stream_rows;
    cfg.parts = parts;
    cfg.loop = choice<kmeans::multi::Loop>(kmeans::multi::kMultiLoops, loop, "kmeans distributed");
    cfg.products = choice<kmeans::tiled::Products>(kmeans::tiled::kTiledProducts, products, "kmeans distributed");
    cfg.blocks = blocks;
    return cfg;
}

// One rank of gpuopt.distributed.kmeans on the GPU (kmeans_cuda.hpp): the Python layer queues local(), the
// all-gather of the slots and close() on one stream (set around each call) and reads the state once a batch.
void bind_kmeans_rank(py::module_& m) {
    using kmeans::multi::Rank;
    py::class_<Rank>(m, "KMeansRank",
                     "One rank's share of a k-means loop split over ranks (csrc/kmeans/kmeans_cuda.hpp): "
                     "KMeansRank(x, rows, order, rank, d, k, threshold, max_iter, centroids, membership, *, loop, "
                     "products, blocks, stream_rows, parts); addresses of this rank's x (n_local, D) float32, the "
                     "centres (k, D) float32 (initial in, result out) and the memberships (n_local,) int32 on the "
                     "device; rows: every rank's n_local, order: the ranks with rows in row order. stream_rows > 0: "
                     "x is host memory, streamed every loop in slabs of that many objects. parts=2: the slot in two "
                     "parts, each all-gathered on its own (part_doubles, then the rest; gathered part by part).")
        .def(py::init([](std::uintptr_t x, const std::vector<std::int64_t>& rows, const std::vector<int>& order,
                         int rank, std::int64_t d, std::int64_t k, float threshold, std::int64_t max_iter,
                         std::uintptr_t centroids, std::uintptr_t membership, const std::string& loop,
                         const std::string& products, int blocks, std::int64_t stream_rows, int parts) {
                 const kmeans::multi::RankConfig cfg = rank_config(loop, products, blocks, stream_rows, parts);
                 py::gil_scoped_release release;
                 return std::make_unique<Rank>(dptr<const float>(x), kmeans::multi::Layout{rows, order}, rank, d, k,
                                               threshold, max_iter, cfg, dptr<float>(centroids),
                                               dptr<std::int32_t>(membership));
             }),
             py::arg("x"), py::arg("rows"), py::arg("order"), py::arg("rank"), py::arg("d"), py::arg("k"),
             py::arg("threshold"), py::arg("max_iter"), py::arg("centroids"), py::arg("membership"), py::kw_only(),
             py::arg("loop") = kmeans::multi::kMultiLoops.default_name(),
             py::arg("products") = kmeans::tiled::kTiledProducts.default_name(),
             py::arg("blocks") = 0, py::arg("stream_rows") = 0, py::arg("parts") = 1)
        .def_property_readonly("slot_doubles", &Rank::slot_doubles,
                               "float64 values of one rank's slot of the all-gather")
        .def_property_readonly("part_doubles", &Rank::part_doubles,
                               "float64 values of the slot's first part (parts=2: all-gathered on its own)")
        .def_property_readonly("side_stream", &Rank::side_stream,
                               "parts=2: the rank's stream for the first part's exchange (a handle; 0 otherwise)")
        .def("local", [](Rank& r, std::uintptr_t slot, int part) { r.local(dptr<double>(slot), part); },
             py::arg("slot"), py::arg("part") = 0, py::call_guard<py::gil_scoped_release>(),
             "Queue this rank's assignment and group sums of part `part` into `slot` (slot_doubles float64 on the "
             "device).")
        .def("close", [](Rank& r, std::uintptr_t gathered) { r.close(dptr<const double>(gathered)); },
             py::arg("gathered"), py::call_guard<py::gil_scoped_release>(),
             "Queue the loop's end from every rank's slot (ranks x slot_doubles float64 on the device, rank order).")
        .def("read",
             [](Rank& r) {
                 int iterations = 0;
                 std::vector<float> delta;
                 bool done = false;
                 {
                     py::gil_scoped_release release;
                     done = r.read(&iterations, &delta);
                 }
                 carray<float> out(static_cast<py::ssize_t>(delta.size()));
                 std::copy(delta.begin(), delta.end(), out.mutable_data());
                 return py::make_tuple(done, iterations, out);
             },
             "Wait for the stream: (stopped, loops run, delta history (loops,) float32).")
        .def_static("check",
                    [](const std::vector<std::int64_t>& rows, const std::vector<int>& order, int rank, std::int64_t d,
                       std::int64_t k, std::int64_t max_iter, const std::string& loop, const std::string& products,
                       int blocks) {
                        kmeans::multi::check(kmeans::multi::Layout{rows, order}, rank, d, k, max_iter,
                                             rank_config(loop, products, blocks));
                    },
                    py::arg("rows"), py::arg("order"), py::arg("rank"), py::arg("d"), py::arg("k"), py::arg("max_iter"),
                    py::kw_only(), py::arg("loop") = kmeans::multi::kMultiLoops.default_name(),
                    py::arg("products") = kmeans::tiled::kTiledProducts.default_name(), py::arg("blocks") = 0,
                    "Raise ValueError if this rank cannot run the loop (nothing runs; needs a device).");

}

kmeans::PersistentConfig persistent_config(int blocks, const std::string& x_memory) {
    GPUOPT_REQUIRE(blocks >= 0, "kmeans device_persistent: blocks must be >= 0 (0: as many as are co-resident)");
    kmeans::PersistentConfig cfg;
    cfg.blocks = blocks;
    cfg.global_x = choice_index(kmeans::kPersistentXMemory, x_memory, "kmeans device_persistent") == 1;  // global
    return cfg;
}

}  // namespace

void bind_kmeans(py::module_& m) {
    bind_kmeans_rank(m);
    py::class_<KMeansArgs>(m, "KMeansArgs",
                           "One k-means loop call: addresses of x (N, D) float32, the centres (k, D) float32 (initial "
                           "in, result out) and the memberships (N,) int32; N, D, k; the stop rule (threshold, "
                           "max_iter).")
        .def(py::init([](std::uintptr_t x, std::uintptr_t centroids, std::uintptr_t membership, std::int64_t n,
                         std::int64_t d, std::int64_t k, float threshold, std::int64_t max_iter) {
                 return KMeansArgs{x, centroids, membership, n, d, k, threshold, max_iter};
             }),
             py::arg("x"), py::arg("centroids"), py::arg("membership"), py::arg("n"), py::arg("d"), py::arg("k"),
             py::arg("threshold"), py::arg("max_iter"))
        .def_readonly("n", &KMeansArgs::n)
        .def_readonly("d", &KMeansArgs::d)
        .def_readonly("k", &KMeansArgs::k);
    // kmeans_device / _fused / _gemm(args, *, loops_per_sync, blocks) -> (iterations, delta (iterations,) float32);
    //   centres and memberships in place.
    //   kmeans_device_tiled takes products too ("auto", "tf32x3", "ffma": its screen's dot products).
    using DeviceLoop = kmeans::KMeansStats (*)(const float*, std::int64_t, std::int64_t, std::int64_t, float,
                                               std::int64_t, float*, std::int32_t*, int, int);
    using DeviceCheck = void (*)(std::int64_t, std::int64_t, std::int64_t);
    struct Loop {
        const char* name;
        DeviceLoop run;
        DeviceCheck check;
    };
    const char* loop_doc = "The whole k-means loop on the GPU (see csrc/kmeans/kmeans_cuda.hpp).";
    const char* check_doc = "Raise ValueError if this variant cannot run this configuration (nothing runs; needs a device).";
    for (const Loop& entry : {Loop{"device", &kmeans::kmeans_device, &kmeans::kmeans_device_check},
                              Loop{"device_fused", &kmeans::kmeans_device_fused, &kmeans::kmeans_device_check},
                              Loop{"device_gemm", &kmeans::kmeans_device_gemm, &kmeans::kmeans_device_gemm_check}}) {
        const DeviceLoop loop = entry.run;
        const DeviceCheck check = entry.check;
        def_variant(m, "kmeans", entry.name,
                    [loop](const KMeansArgs& a, int loops_per_sync, int blocks) {
                        kmeans::KMeansStats stats;
                        {
                            py::gil_scoped_release release;
                            stats = loop(a.px(), a.n, a.d, a.k, a.threshold, a.max_iter, a.pc(), a.pm(),
                                         loops_per_sync, blocks);
                        }
                        return py::make_tuple(stats.iterations, delta_array(stats));
                    },
                    py::arg("args"), py::kw_only(),
                    py::arg("loops_per_sync"), py::arg("blocks") = kmeans::kLoopBlocks.default_value(), loop_doc);
        def_check(m, "kmeans", entry.name,
                  [check](std::int64_t n, std::int64_t d, std::int64_t k, int loops_per_sync, int blocks) {
                      check_loop_args(loops_per_sync, blocks);
                      check(n, d, k);
                  },
                  py::arg("n"), py::arg("d"), py::arg("k"), py::kw_only(), py::arg("loops_per_sync") = 1,
                  py::arg("blocks") = kmeans::kLoopBlocks.default_value(), check_doc);
    }
    def_variant(m, "kmeans", "device_tiled",
                [](const KMeansArgs& a, int loops_per_sync, int blocks, const std::string& products) {
                    const auto p = choice<kmeans::tiled::Products>(kmeans::tiled::kTiledProducts, products,
                                                                   "kmeans device_tiled");
                    kmeans::KMeansStats stats;
                    {
                        py::gil_scoped_release release;
                        stats = kmeans::kmeans_device_tiled(a.px(), a.n, a.d, a.k, a.threshold, a.max_iter, a.pc(),
                                                            a.pm(), loops_per_sync, blocks, p);
                    }
                    return py::make_tuple(stats.iterations, delta_array(stats));
                },
                py::arg("args"), py::kw_only(),
                py::arg("loops_per_sync"), py::arg("blocks") = kmeans::kLoopBlocks.default_value(),
                py::arg("products") = kmeans::tiled::kTiledProducts.default_name(), loop_doc);
    def_check(m, "kmeans", "device_tiled",
              [](std::int64_t n, std::int64_t d, std::int64_t k, int loops_per_sync, int blocks,
                 const std::string& products) {
                  check_loop_args(loops_per_sync, blocks);
                  kmeans::kmeans_device_tiled_check(
                      n, d, k, choice<kmeans::tiled::Products>(kmeans::tiled::kTiledProducts, products,
                                                               "kmeans device_tiled"));
              },
              py::arg("n"), py::arg("d"), py::arg("k"), py::kw_only(), py::arg("loops_per_sync") = 1,
              py::arg("blocks") = kmeans::kLoopBlocks.default_value(),
              py::arg("products") = kmeans::tiled::kTiledProducts.default_name(), check_doc);
    // kmeans_device_persistent(args, *, blocks, x_memory, init_dev_ptr=0, result_dev_ptr=0) -> (iterations, delta);
    //   one cooperative launch for the whole run. init_dev_ptr: the initial centres on the device (0: args.centroids
    //   holds them), read by the kernel, so no copy is queued. result_dev_ptr: int32 [1 + max_iter] on the device;
    //   where the run is deferred (kmeans_cuda.hpp) it returns (0, empty) at once and the result goes there.
    def_variant(m, "kmeans", "device_persistent",
                [](const KMeansArgs& a, int blocks, const std::string& x_memory, std::uintptr_t init_dev,
                   std::uintptr_t result_dev) {
                    const kmeans::PersistentConfig cfg = persistent_config(blocks, x_memory);
                    kmeans::KMeansStats stats;
                    {
                        py::gil_scoped_release release;
                        stats = kmeans::kmeans_device_persistent(a.px(), a.n, a.d, a.k, a.threshold, a.max_iter,
                                                                 a.pc(), a.pm(), cfg, dptr<const float>(init_dev),
                                                                 dptr<std::int32_t>(result_dev));
                    }
                    return py::make_tuple(stats.iterations, delta_array(stats));
                },
                py::arg("args"), py::kw_only(),
                py::arg("blocks") = kmeans::kPersistentBlocks.default_value(),
                py::arg("x_memory") = kmeans::kPersistentXMemory.default_name(), py::arg("init_dev_ptr") = 0,
                py::arg("result_dev_ptr") = 0,
                "The whole k-means run in one cooperative launch (see csrc/kmeans/kmeans_cuda.hpp).");
    m.def("kmeans_persistent_mapped", &kmeans::kmeans_device_persistent_mapped, py::arg("on"),
          "Testing aid: device_persistent's result through mapped host memory (True, the default) or copied back; "
          "returns the previous setting.");
    def_check(m, "kmeans", "device_persistent",
              [](std::int64_t n, std::int64_t d, std::int64_t k, int blocks, const std::string& x_memory) {
                  persistent_config(blocks, x_memory);
                  kmeans::kmeans_device_persistent_check(n, d, k);
              },
              py::arg("n"), py::arg("d"), py::arg("k"), py::kw_only(),
              py::arg("blocks") = kmeans::kPersistentBlocks.default_value(),
              py::arg("x_memory") = kmeans::kPersistentXMemory.default_name(),
              "Raise ValueError if device_persistent cannot run this configuration (nothing runs; needs a device).");
    m.def("kmeans_grid_barrier_ms", &kmeans::kmeans_grid_barrier_ms, py::arg("blocks_per_sm"), py::arg("barriers"),
          py::arg("cg"), py::call_guard<py::gil_scoped_release>(),
          "CUDA-event ms of `barriers` grid barriers alone (device_persistent's hand-written one, or cg: "
          "cooperative_groups').");
    // kmeans_stream(args, *, chunk_points, buffers, host_memory, assign) -> (iterations, delta, host path);
    //   args.x: host (pinned or not) or device memory.
    def_variant(m, "kmeans", "stream",
                [](const KMeansArgs& a, std::int64_t chunk_points, int buffers, const std::string& host_memory,
                   const std::string& assign) {
                    const kmeans::StreamConfig cfg = stream_config(chunk_points, buffers, host_memory, assign);
                    kmeans::KMeansStats stats;
                    int path = 0;
                    {
                        py::gil_scoped_release release;
                        stats = kmeans::kmeans_stream(a.px(), a.n, a.d, a.k, a.threshold, a.max_iter, a.pc(), a.pm(),
                                                      cfg, &path);
                    }
                    const carray<float> delta = delta_array(stats);
                    static const char* const paths[] = {"device", "pinned", "registered", "staged"};
                    return py::make_tuple(stats.iterations, delta, paths[path]);
                },
                py::arg("args"), py::kw_only(), py::arg("chunk_points") = kmeans::kStreamChunkPoints.default_value(),
                py::arg("buffers") = kmeans::kStreamBuffers.default_value(),
                py::arg("host_memory") = kmeans::kStreamHostMemory.default_name(),
                py::arg("assign") = kmeans::kStreamAssign.default_name(),
                "k-means over points streamed from host memory (kmeans_cuda.hpp).");
    def_check(m, "kmeans", "stream",
              [](std::int64_t n, std::int64_t d, std::int64_t k, std::int64_t chunk_points, int buffers,
                 const std::string& host_memory, const std::string& assign) {
                  kmeans::kmeans_stream_check(n, d, k, stream_config(chunk_points, buffers, host_memory, assign));
              },
              py::arg("n"), py::arg("d"), py::arg("k"), py::kw_only(),
              py::arg("chunk_points") = kmeans::kStreamChunkPoints.default_value(),
              py::arg("buffers") = kmeans::kStreamBuffers.default_value(),
              py::arg("host_memory") = kmeans::kStreamHostMemory.default_name(),
              py::arg("assign") = kmeans::kStreamAssign.default_name(),
              "Raise ValueError if the stream variant cannot run this configuration (nothing runs; needs a device).");
    def_variant(m, "kmeans_predict", "device",
                [](std::uintptr_t x_dev, std::uintptr_t centroids_dev, std::uintptr_t membership_dev, std::int64_t n,
                   std::int64_t d, std::int64_t k) {
                    py::gil_scoped_release release;
                    kmeans::kmeans_predict_device(dptr<const float>(x_dev), n, d, dptr<const float>(centroids_dev), k,
                                                  dptr<std::int32_t>(membership_dev));
                },
                py::arg("x_dev_ptr"), py::arg("centroids_dev_ptr"), py::arg("membership_dev_ptr"), py::arg("n"),
                py::arg("d"), py::arg("k"), "The nearest centre of each object (see csrc/kmeans/kmeans_cuda.hpp).");
    def_check(m, "kmeans_predict", "device", &kmeans::kmeans_predict_device_check, py::arg("n"), py::arg("d"),
              py::arg("k"), "Raise ValueError if kmeans_predict_device cannot run this configuration.");
    // The CMU report's ladder over Liao's port (kmeans_cuda.hpp): one launcher per step, the layout fixed
    // by the step, the thread counts its parameters (reduction_threads 0: Liao's rule).
    struct Step {
        const char* name;
        bool aos, vector_loads;
    };
    for (const Step step : {Step{"liao", false, false}, Step{"liao_occupancy", false, false}, Step{"liao_aos", true, false},
                            Step{"liao_vec", true, true}}) {
        const bool aos = step.aos, vec = step.vector_loads;
        def_variant(m, "kmeans", step.name,
                    [aos, vec](std::uintptr_t x_dev, const carray<float>& x_host, const carray<float>& init,
                               float threshold, std::int64_t max_iter, int threads, int reduction_threads, bool timing) {
                        return kmeans_liao_py(x_dev, x_host, init, threshold, max_iter,
                                              liao_config(threads, reduction_threads, aos, vec), timing);
                    },
                    py::arg("x_dev_ptr"), py::arg("x_host"), py::arg("init"), py::arg("threshold"), py::arg("max_iter"),
                    py::kw_only(), py::arg("threads"), py::arg("reduction_threads") = 0, py::arg("timing") = true,
                    "Liao's CUDA k-means, a step of the CMU report's ladder (see csrc/kmeans/kmeans_cuda.hpp).");
        def_check(m, "kmeans", step.name,
                  [aos, vec](std::int64_t n, std::int64_t d, std::int64_t k, int threads, int reduction_threads) {
                      kmeans::kmeans_liao_check(n, d, k, liao_config(threads, reduction_threads, aos, vec));
                  },
                  py::arg("n"), py::arg("d"), py::arg("k"), py::kw_only(), py::arg("threads"),
                  py::arg("reduction_threads") = 0,
                  "Raise ValueError if this step cannot run the configuration (nothing runs; needs a device).");
    }
}

}  // namespace gpuopt::bind
