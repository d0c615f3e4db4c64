// DLPack (https://dmlc.github.io/dlpack/latest/): gpuopt's device arrays handed to other libraries without a copy
// (DeviceArray.__dlpack__), and theirs taken in (gpuopt.from_dlpack). The legacy, unversioned capsule ("dltensor"),
// which every consumer reads. The ABI structs are written out below as the specification defines them.
#include <cstdint>
#include <vector>

#include "../common/cuda_check.cuh"
#include "cuda_bindings.hpp"

namespace gpuopt::bind {

namespace {

struct DLDevice {
    std::int32_t device_type;  // kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13
    std::int32_t device_id;
};
struct DLDataType {
    std::uint8_t code;  // kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6
    std::uint8_t bits;
    std::uint16_t lanes;
};
struct DLTensor {
    void* data;
    DLDevice device;
    std::int32_t ndim;
    DLDataType dtype;
    std::int64_t* shape;
    std::int64_t* strides;  // in elements; nullptr: C-contiguous
    std::uint64_t byte_offset;
};
struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor* self);
};

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedName = "used_dltensor";

// What an exported tensor keeps alive: the DeviceArray (its memory) and the shape the DLTensor points to.
struct ExportContext {
    py::object owner;
    std::vector<std::int64_t> shape;
};

void delete_export(DLManagedTensor* t) {
    if (t == nullptr) return;
    py::gil_scoped_acquire gil;  // a consumer may delete from any thread
    delete static_cast<ExportContext*>(t->manager_ctx);
    delete t;
}

// A capsule no consumer took: its tensor is still ours to delete.
void capsule_destructor(PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, kCapsuleName)) {
        auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
        delete_export(t);
    }
}

// A tensor taken in: the producer's deleter runs when the last view of it goes.
class ImportedTensor {
public:
    explicit ImportedTensor(DLManagedTensor* t) : t_(t) {}
    ~ImportedTensor() {
        if (t_ != nullptr && t_->deleter != nullptr) t_->deleter(t_);
    }
    ImportedTensor(const ImportedTensor&) = delete;
    ImportedTensor& operator=(const ImportedTensor&) = delete;

private:
    DLManagedTensor* t_;
};

int pointer_device(std::uintptr_t ptr) {
    cudaPointerAttributes attr{};
    GPUOPT_CUDA_CHECK(cudaPointerGetAttributes(&attr, reinterpret_cast<const void*>(ptr)));
    GPUOPT_REQUIRE(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged,
                   "dlpack: the address is not device memory");
    return attr.device;
}

}  // namespace

void bind_dlpack(py::module_& m) {
    py::class_<ImportedTensor>(m, "DLPackOwner", "Keeps a tensor taken in through DLPack alive; its producer's "
                                                 "deleter runs when this goes.");
    m.def("pointer_device", &pointer_device, py::arg("ptr"), "The device that owns a device address.");
    m.def("dlpack_export",
          [](py::object owner, std::uintptr_t ptr, const std::vector<std::int64_t>& shape, int code, int bits,
             int device) {
              auto* ctx = new ExportContext{std::move(owner), shape};
              auto* t = new DLManagedTensor{};
              t->dl_tensor.data = reinterpret_cast<void*>(ptr);
              t->dl_tensor.device = DLDevice{2, device};
              t->dl_tensor.ndim = static_cast<std::int32_t>(ctx->shape.size());
              t->dl_tensor.dtype = DLDataType{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), 1};
              t->dl_tensor.shape = ctx->shape.empty() ? nullptr : ctx->shape.data();
              t->dl_tensor.strides = nullptr;  // C-contiguous
              t->dl_tensor.byte_offset = 0;
              t->manager_ctx = ctx;
              t->deleter = &delete_export;
              PyObject* capsule = PyCapsule_New(t, kCapsuleName, &capsule_destructor);
              if (capsule == nullptr) {
                  delete_export(t);
                  throw py::error_already_set();
              }
              return py::reinterpret_steal<py::capsule>(capsule);
          },
          py::arg("owner"), py::arg("ptr"), py::arg("shape"), py::arg("code"), py::arg("bits"), py::arg("device"),
          "A DLPack capsule viewing `owner`'s C-contiguous device memory (kept alive while the consumer holds it).");
    m.def("dlpack_import",
          [](py::capsule capsule) {
              PyObject* c = capsule.ptr();
              GPUOPT_REQUIRE(PyCapsule_IsValid(c, kCapsuleName),
                             "from_dlpack: expected an unconsumed 'dltensor' capsule (each capsule is taken once)");
              auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kCapsuleName));
              PyCapsule_SetName(c, kUsedName);  // ours now: the capsule's destructor leaves it alone
              auto owner = std::make_unique<ImportedTensor>(t);
              const DLTensor& d = t->dl_tensor;
              py::list shape, strides;
              for (int i = 0; i < d.ndim; ++i) {
                  shape.append(d.shape[i]);
                  if (d.strides != nullptr) strides.append(d.strides[i]);
              }
              const auto ptr = reinterpret_cast<std::uintptr_t>(d.data) + d.byte_offset;
              py::object strides_or_none = d.strides != nullptr ? py::object(py::tuple(strides)) : py::none();
              return py::make_tuple(ptr, py::tuple(shape), strides_or_none, d.dtype.code, d.dtype.bits, d.dtype.lanes,
                                    d.device.device_type, d.device.device_id, std::move(owner));
          },
          py::arg("capsule"),
          "(ptr, shape, strides in elements or None, dtype code, bits, lanes, device type, device id, owner) of a "
          "DLPack capsule, which it consumes; the owner runs the producer's deleter when it goes.");
}

}  // namespace gpuopt::bind
