// CUDA-event timing: the only clock that measures device work without a host sync in
// the middle. Events are created once and reused; recorded on the current stream unless told otherwise.
#pragma once

#include "cuda_check.cuh"
#include "stream.hpp"

namespace gpuopt {

class EventTimer {
public:
    EventTimer() {
        GPUOPT_CUDA_CHECK(cudaEventCreate(&start_));
        try {
            GPUOPT_CUDA_CHECK(cudaEventCreate(&stop_));
        } catch (...) {
            cudaEventDestroy(start_);
            throw;
        }
    }
    ~EventTimer() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;

    void start(cudaStream_t stream = current_stream()) { GPUOPT_CUDA_CHECK(cudaEventRecord(start_, stream)); }
    void stop(cudaStream_t stream = current_stream()) { GPUOPT_CUDA_CHECK(cudaEventRecord(stop_, stream)); }
    // Milliseconds between start() and stop(); waits for the stop event.
    float elapsed_ms() const {
        GPUOPT_CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0.f;
        GPUOPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        return ms;
    }

private:
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
};

}  // namespace gpuopt
