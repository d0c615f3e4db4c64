// Owning, move-only device allocation from the caching pool (memory_pool.hpp).
#pragma once

#include <cstddef>
#include <utility>

#include "cuda_check.cuh"
#include "error.hpp"
#include "memory_pool.hpp"

namespace gpuopt {

template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) ptr_ = static_cast<T*>(pool_alloc(count_ * sizeof(T)));
    }
    ~DeviceBuffer() { reset(); }

    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            ptr_ = std::exchange(o.ptr_, nullptr);
            count_ = std::exchange(o.count_, 0);
        }
        return *this;
    }

    T* data() const { return ptr_; }
    std::size_t size() const { return count_; }
    std::size_t bytes() const { return count_ * sizeof(T); }

    void upload(const T* host, std::size_t count, cudaStream_t stream = nullptr) {
        GPUOPT_REQUIRE(count <= count_, "copy larger than the device buffer");
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(ptr_, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
    }
    void download(T* host, std::size_t count, cudaStream_t stream = nullptr) const {
        GPUOPT_REQUIRE(count <= count_, "copy larger than the device buffer");
        GPUOPT_CUDA_CHECK(cudaMemcpyAsync(host, ptr_, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
    }

private:
    void reset() noexcept {
        if (ptr_) pool_free(ptr_, count_ * sizeof(T));
        ptr_ = nullptr;
        count_ = 0;
    }
    T* ptr_ = nullptr;
    std::size_t count_ = 0;
};

}  // namespace gpuopt
