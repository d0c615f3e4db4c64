// A launcher's short-lived scratch, carved from one block. Where it is safe, the block is the calling thread's
// arena for the current stream, kept from call to call: the next call on that stream runs after this one's
// kernels (stream order), so reusing the same bytes needs no allocation, no free and no host wait. A pool
// allocation and its free are ~0.75 µs of host time each (H200 host, measured); a sparse call took five of them.
//
// The arena is used on the legacy default stream and the per-thread default stream only: they live as long as
// the process, whereas a destroyed stream's handle can come back as a new stream while the old one's work still
// runs. Elsewhere -- another stream, a stream being captured (the graph owns its memory: an allocation node), a
// Scratch inside another on the same thread, or more than kScratchArenaMaxBytes -- the block is a pool
// allocation (memory_pool.hpp), freed in stream order as before.
//
// A launcher whose first kernel is a programmatic dependent launch must not use an arena (that kernel may start
// before the previous call's last kernel ends); none does.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "memory_pool.hpp"

namespace gpuopt {

struct ScratchArena;

inline constexpr std::size_t kScratchArenaMaxBytes = std::size_t{64} << 20;
inline constexpr std::size_t kScratchAlign = 256;
inline constexpr std::size_t kScratchMaxParts = 8;

class Scratch {
public:
    // One part per entry of `bytes` (each 256-byte aligned; a 0-byte part gets a valid, unusable pointer).
    explicit Scratch(std::initializer_list<std::size_t> bytes);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    template <typename T>
    T* get(std::size_t part) const {
        return static_cast<T*>(parts_[part]);
    }

private:
    ScratchArena* arena_ = nullptr;  // held while this Scratch lives
    PoolBlock block_;                // where no arena was used
    void* parts_[kScratchMaxParts] = {};
};

// Frees every arena not in use (after a device synchronisation: pool_release_cached).
void scratch_release_idle() noexcept;
std::size_t scratch_arena_bytes() noexcept;  // what the arenas hold now, all threads

}  // namespace gpuopt
