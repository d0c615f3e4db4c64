// gpuopt._cuda: the CUDA side. Imported lazily by gpuopt; a machine without a driver can
// still import it (the CUDA runtime is linked statically) and is told why no device is usable.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../common/cuda_check.cuh"
#include "../common/device.hpp"
#include "../common/error.hpp"
#include "../common/memory_pool.hpp"
#include "../common/runtime.hpp"
#include "../common/scratch.hpp"
#include "../common/staging.hpp"
#include "../common/stream.hpp"
#include "cuda_bindings.hpp"

namespace py = pybind11;

namespace gpuopt::bind {

namespace {

py::dict device_info_py(int index) {
    const DeviceInfo d = device_info(index);
    py::dict out;
    out["index"] = d.index;
    out["name"] = d.name;
    out["compute_capability"] = py::make_tuple(d.cc_major, d.cc_minor);
    out["multiprocessors"] = d.multiprocessors;
    out["total_memory_bytes"] = d.total_memory_bytes;
    out["l2_cache_bytes"] = d.l2_cache_bytes;
    out["shared_memory_per_block_bytes"] = d.shared_memory_per_block_bytes;
    out["shared_memory_per_block_optin_bytes"] = d.shared_memory_per_block_optin_bytes;
    out["shared_memory_per_sm_bytes"] = d.shared_memory_per_sm_bytes;
    out["constant_memory_bytes"] = d.constant_memory_bytes;
    out["registers_per_block"] = d.registers_per_block;
    out["max_threads_per_block"] = d.max_threads_per_block;
    out["max_threads_per_sm"] = d.max_threads_per_sm;
    out["warp_size"] = d.warp_size;
    out["clock_rate_khz"] = d.clock_rate_khz;
    out["memory_clock_rate_khz"] = d.memory_clock_rate_khz;
    out["memory_bus_width_bits"] = d.memory_bus_width_bits;
    out["driver_version"] = d.driver_version;
    out["runtime_version"] = d.runtime_version;
    out["cublas_runtime_version"] = cublas_runtime_version();
    out["cudnn_runtime_version"] = cudnn_runtime_version();
    return out;
}

// C-contiguous host array of exactly nbytes (any dtype): the only thing copies accept.
const void* host_source(const py::array& a, std::size_t nbytes) {
    GPUOPT_REQUIRE(a.flags() & py::array::c_style, "host array must be C-contiguous");
    GPUOPT_REQUIRE(static_cast<std::size_t>(a.nbytes()) == nbytes, "host array size does not match the copy");
    return a.data();
}

class Event {
public:
    Event() { GPUOPT_CUDA_CHECK(cudaEventCreate(&ev_)); }
    ~Event() { cudaEventDestroy(ev_); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    // On `stream` (a handle), or the current stream (-1).
    void record(std::intptr_t stream) {
        GPUOPT_CUDA_CHECK(cudaEventRecord(ev_, stream < 0 ? current_stream() : stream_from_handle(stream)));
    }
    void synchronize() {
        py::gil_scoped_release release;
        GPUOPT_CUDA_CHECK(cudaEventSynchronize(ev_));
    }
    // Milliseconds from this event to `end` (waits for `end`).
    float elapsed_ms(Event& end) {
        end.synchronize();
        float ms = 0.f;
        GPUOPT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_, end.ev_));
        return ms;
    }

private:
    cudaEvent_t ev_ = nullptr;
};

// One CUDA graph captured from a stream (gpuopt.cuda.Graph): capture in this thread's mode (other threads may go
// on allocating), instantiated to free its own unfreed allocations at each launch (its outputs are graph memory,
// at the same addresses every launch), launched on any stream.
class Graph {
public:
    Graph() = default;
    ~Graph() { reset(); }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    void begin(std::uintptr_t stream) {
        GPUOPT_REQUIRE(!capturing_ && exec_ == nullptr, "Graph.begin: this graph is captured already");
        const cudaStream_t s = stream_from_handle(stream);
        GPUOPT_REQUIRE(s != nullptr, "Graph.begin: the legacy default stream cannot be captured; use a stream of "
                                     "its own");
        GPUOPT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        stream_ = s, capturing_ = true;
    }
    // Ends the capture and instantiates the graph (abort=True: ends it and throws the graph away).
    void end(bool abort) {
        GPUOPT_REQUIRE(capturing_, "Graph.end: no capture in progress");
        capturing_ = false;
        cudaGraph_t graph = nullptr;
        const cudaError_t status = cudaStreamEndCapture(stream_, &graph);
        if (abort || status != cudaSuccess) {
            if (graph) cudaGraphDestroy(graph);
            cudaGetLastError();
            if (!abort) GPUOPT_CUDA_CHECK(status);
            return;
        }
        graph_ = graph;
        GPUOPT_CUDA_CHECK(cudaGraphInstantiateWithFlags(&exec_, graph_, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    }
    void launch(std::uintptr_t stream) {
        GPUOPT_REQUIRE(exec_ != nullptr, "Graph.launch: nothing captured");
        GPUOPT_CUDA_CHECK(cudaGraphLaunch(exec_, stream_from_handle(stream)));
    }
    std::size_t nodes() const {
        std::size_t n = 0;
        if (graph_) GPUOPT_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
        return n;
    }

private:
    void reset() noexcept {
        if (capturing_) {
            cudaGraph_t g = nullptr;
            cudaStreamEndCapture(stream_, &g);
            if (g) cudaGraphDestroy(g);
            cudaGetLastError();
        }
        if (exec_) cudaGraphExecDestroy(exec_);
        if (graph_) cudaGraphDestroy(graph_);
        exec_ = nullptr, graph_ = nullptr, capturing_ = false;
    }
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
    cudaStream_t stream_ = nullptr;
    bool capturing_ = false;
};

}  // namespace

void bind_runtime(py::module_& m) {
    m.def("device_count", &cuda_device_count, "Usable CUDA devices (0 without driver or GPU).");
    m.def("unavailable_reason", &cuda_unavailable_reason, "Why no device is usable ('' if one is).");
    m.def("device_info", &device_info_py, py::arg("index") = 0, "Properties of one device.");
    m.def("current_device", [] {
        int device = 0;
        GPUOPT_CUDA_CHECK(cudaGetDevice(&device));
        return device;
    }, "The calling thread's current CUDA device (part of every cached plan's key).");

    py::class_<Buffer>(m, "Buffer", "Device memory from gpuopt's pool, allocated on the current stream.")
        .def(py::init<std::size_t>(), py::arg("nbytes"))
        .def_property_readonly("ptr", &Buffer::ptr)
        .def_property_readonly("stream", &Buffer::stream)
        .def("used_on", &Buffer::used_on, py::arg("stream"),
             "Order this buffer's free after the work queued on `stream` (a handle) by then: an op there read or "
             "wrote it.")
        .def_property_readonly("nbytes", &Buffer::nbytes);

    m.def("copy_h2d", [](std::uintptr_t dst, const py::array& src, std::size_t nbytes, bool check_finite) {
        const void* p = host_source(src, nbytes);  // (float32 for check_finite: gpuopt.cuda.to_device_checked checks)
        py::gil_scoped_release release;
        return copy_host_to_device_staged(dptr<void>(dst), p, nbytes, check_finite);
    }, py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("check_finite") = false,
       "Copy a C-contiguous host array to the device (staged through pinned memory when large); with "
       "check_finite (float32 only) returns whether every value is finite, else True.");
    m.def("copy_d2h", [](py::array& dst, std::uintptr_t src, std::size_t nbytes, std::uintptr_t stream) {
        void* p = const_cast<void*>(host_source(dst, nbytes));
        GPUOPT_REQUIRE(dst.writeable(), "destination array must be writeable");
        py::gil_scoped_release release;
        StreamScope scope(stream_from_handle(stream));
        copy_to_host_sync(p, dptr<const void>(src), nbytes);
    }, py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("stream") = 0,
       "Copy device memory to a host array after the work queued on `stream` (the data's producer); waits.");
    m.def("copy_d2d", [](std::uintptr_t dst, std::uintptr_t src, std::size_t nbytes, std::uintptr_t stream) {
        StreamScope scope(stream_from_handle(stream));
        copy_device_to_device(dptr<void>(dst), dptr<const void>(src), nbytes);
    }, py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("stream") = 0);
    m.def("widen_half", [](std::uintptr_t dst, std::uintptr_t src, std::int64_t n, bool bfloat16) {
        widen_half_to_float(dptr<float>(dst), dptr<const std::uint16_t>(src), n, bfloat16);
    }, py::arg("dst"), py::arg("src"), py::arg("n"), py::arg("bfloat16"),
       "dst (n float32) = src (n float16, or bfloat16) widened, exactly, on the current stream.");
    m.def("memset", [](std::uintptr_t dst, int value, std::size_t nbytes) { memset_device(dptr<void>(dst), value, nbytes); },
          py::arg("dst"), py::arg("value"), py::arg("nbytes"));

    py::class_<Event>(m, "Event", "A CUDA event (timing enabled).")
        .def(py::init<>())
        .def("record", &Event::record, py::arg("stream") = -1, "Record on a stream handle (-1: the current stream).")
        .def("synchronize", &Event::synchronize)
        .def("elapsed_ms", &Event::elapsed_ms, py::arg("end"));

    m.def("synchronize", [] {
        py::gil_scoped_release release;
        device_synchronize();
    }, "Wait for all queued device work; raises RuntimeError if a kernel failed.");
    m.def("check_errors", [] {
        py::gil_scoped_release release;
        check_device_errors();
    });
    m.def("set_stream", [](std::uintptr_t stream) {
        const auto previous = reinterpret_cast<std::uintptr_t>(current_stream());
        set_current_stream(stream_from_handle(stream));
        return previous;
    }, py::arg("stream"), "Make `stream` (a handle: 0 or 1 legacy, 2 per-thread, else a cudaStream_t) this thread's "
       "current stream, the one every launcher queues on; returns the previous one.");
    m.def("current_stream", [] { return reinterpret_cast<std::uintptr_t>(current_stream()); },
          "This thread's current stream (a handle; 0: the legacy default stream).");
    m.def("stream_wait", [](std::uintptr_t waiter, std::uintptr_t producer) {
        stream_wait(stream_from_handle(waiter), stream_from_handle(producer));
    }, py::arg("waiter"), py::arg("producer"),
       "Make stream `waiter` wait, on the device, for the work queued so far on stream `producer` (handles).");
    m.def("new_stream", [] {
        cudaStream_t s = nullptr;
        GPUOPT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        return reinterpret_cast<std::uintptr_t>(s);
    }, "A new non-blocking stream on the current device (a handle; never destroyed by gpuopt).");
    py::class_<Graph>(m, "Graph", "A CUDA graph captured from a stream (gpuopt.cuda.Graph).")
        .def(py::init<>())
        .def("begin", &Graph::begin, py::arg("stream"))
        .def("end", &Graph::end, py::arg("abort") = false)
        .def("launch", &Graph::launch, py::arg("stream"))
        .def_property_readonly("nodes", &Graph::nodes);
    m.def("stream_synchronize", [](std::uintptr_t stream) {
        py::gil_scoped_release release;
        GPUOPT_CUDA_CHECK(cudaStreamSynchronize(stream_from_handle(stream)));
    }, py::arg("stream"), "Wait on the host for the work queued on one stream.");
    m.def("spin", &spin, py::arg("microseconds"), "Keep the GPU busy (hides launch overhead in timings).");
    m.def("pool_release_cached", [] {
        pool_release_cached();
        staging_release();
    }, "Give the pool's cached blocks and the pinned staging slots back to the driver.");
    m.def("pool_cached_bytes", &pool_cached_bytes);
    m.def("pool_in_use_bytes", &pool_in_use_bytes);
    m.def("scratch_arena_bytes", &scratch_arena_bytes,
          "What the launchers' per-thread, per-stream scratch arenas hold now (csrc/common/scratch.hpp).");
    m.def("set_poison", &pool_set_poison, py::arg("on"));
    m.def("poison", &pool_poison);
}

}  // namespace gpuopt::bind

PYBIND11_MODULE(_cuda, m) {
    m.doc() = "gpuopt CUDA kernels (internal; use the gpuopt package API)";
    gpuopt::bind::init_variant_tables(m);
    gpuopt::bind::bind_runtime(m);
    gpuopt::bind::bind_dlpack(m);
    gpuopt::bind::bind_matmul(m);
    gpuopt::bind::bind_conv(m);
    gpuopt::bind::bind_conv_cs6235(m);
    gpuopt::bind::bind_conv_ece408(m);
    gpuopt::bind::bind_conv_gemm(m);
    gpuopt::bind::bind_conv_direct(m);
    gpuopt::bind::bind_conv_winograd(m);
    gpuopt::bind::bind_kmeans(m);
    gpuopt::bind::bind_sparse(m);
    gpuopt::bind::bind_nn(m);
    gpuopt::bind::bind_nn_conv_pool(m);
}
