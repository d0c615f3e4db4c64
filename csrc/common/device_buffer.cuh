// Owning, move-only device allocation from gpuopt's pool (memory_pool.hpp), on the current stream (stream.hpp)
// and freed in that stream's order.
#pragma once

#include <cstddef>
#include <utility>

#include "cuda_check.cuh"
#include "error.hpp"
#include "memory_pool.hpp"
#include "stream.hpp"

namespace gpuopt {

template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) block_ = pool_alloc(count_ * sizeof(T));
    }
    ~DeviceBuffer() { reset(); }

    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : block_(std::exchange(o.block_, PoolBlock{})), count_(std::exchange(o.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            block_ = std::exchange(o.block_, PoolBlock{});
            count_ = std::exchange(o.count_, 0);
        }
        return *this;
    }

    T* data() const { return static_cast<T*>(block_.ptr); }
    std::size_t size() const { return count_; }
    std::size_t bytes() const { return count_ * sizeof(T); }

    // Queued on the buffer's stream.
    void upload(const T* host, std::size_t count) {
        GPUOPT_REQUIRE(count <= count_, "copy larger than the device buffer");
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(data(), host, count * sizeof(T), cudaMemcpyHostToDevice, block_.stream));
    }
    void download(T* host, std::size_t count) const {
        GPUOPT_REQUIRE(count <= count_, "copy larger than the device buffer");
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(host, data(), count * sizeof(T), cudaMemcpyDeviceToHost, block_.stream));
    }

private:
    void reset() noexcept {
        pool_free(block_);
        block_ = PoolBlock{};
        count_ = 0;
    }
    PoolBlock block_;
    std::size_t count_ = 0;
};

}  // namespace gpuopt
