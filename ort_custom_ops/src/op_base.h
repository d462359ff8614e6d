// The ORT op definition shared by every ascend.moe op and execution provider.
//
// `Def` describes the op once (EP independent):
//   static constexpr const char* kName; static constexpr const AttrSpec* kAttrs; kNumAttrs;
//   kNumInputs; kNumOutputs; static bool InputOptional(size_t); static bool OutputOptional(size_t);
//   static ONNXTensorElementDataType OutputType(size_t);  // UNDEFINED: decided at run time
//   static OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp*, OrtShapeInferContext*);
// `Kernel` is one execution provider's kernel:
//   static constexpr const char* kProvider; explicit Kernel(const OrtKernelInfo*);
//   void Compute(Ort::KernelContext&);
//   optional: static OrtMemType InputMemoryType(size_t);  // e.g. inputs a device kernel reads
//                                                         // on the host (OrtMemTypeCPUInput)
#pragma once

#include <exception>
#include <string>
#include <type_traits>

#include "op_utils.h"

namespace ascend_moe {

// Runs fn and turns any exception into an OrtStatus: exceptions never cross the C API.
template <typename Fn>
OrtStatusPtr ToStatus(const char* op_name, Fn&& fn) {
  try {
    fn();
  } catch (const Ort::Exception& e) {
    return Ort::GetApi().CreateStatus(e.GetOrtErrorCode(), e.what());
  } catch (const std::exception& e) {
    return Ort::GetApi().CreateStatus(ORT_FAIL, e.what());
  } catch (...) {
    return Ort::GetApi().CreateStatus(ORT_FAIL, Str(op_name, ": unknown error").c_str());
  }
  return nullptr;
}

// Adapts a Kernel to the status-returning kernel interface of CustomOpBase.
template <typename Def, typename Kernel>
struct StatusKernel : Kernel {
  using Kernel::Kernel;
  OrtStatusPtr ComputeV2(OrtKernelContext* context) {
    return ToStatus(Def::kName, [&] {
      Ort::KernelContext ctx(context);
      this->Compute(ctx);
    });
  }
};

template <typename Kernel, typename = void>
struct HasInputMemoryType : std::false_type {};
template <typename Kernel>
struct HasInputMemoryType<Kernel, std::void_t<decltype(Kernel::InputMemoryType(size_t{0}))>>
    : std::true_type {};

template <typename Def, typename Kernel>
struct AscendMoeOp
    : Ort::CustomOpBase<AscendMoeOp<Def, Kernel>, StatusKernel<Def, Kernel>, /*WithStatus=*/true> {
  AscendMoeOp() {
    OrtCustomOp::InferOutputShapeFn = Def::InferShapes;
    RegisterManifestEntry({Def::kName, Kernel::kProvider, Def::kAttrs, Def::kNumAttrs});
  }

  OrtStatusPtr CreateKernelV2(const OrtApi& /*api*/, const OrtKernelInfo* info,
                              void** kernel) const {
    *kernel = nullptr;
    return ToStatus(Def::kName, [&] { *kernel = new StatusKernel<Def, Kernel>(info); });
  }

  const char* GetName() const { return Def::kName; }
  const char* GetExecutionProviderType() const { return Kernel::kProvider; }

  size_t GetInputTypeCount() const { return Def::kNumInputs; }
  ONNXTensorElementDataType GetInputType(size_t /*index*/) const {
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;  // several types allowed: checked at run time
  }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const {
    return Characteristic(Def::InputOptional(index));
  }
  OrtMemType GetInputMemoryType(size_t index) const {
    if constexpr (HasInputMemoryType<Kernel>::value) return Kernel::InputMemoryType(index);
    return OrtMemTypeDefault;
  }

  size_t GetOutputTypeCount() const { return Def::kNumOutputs; }
  ONNXTensorElementDataType GetOutputType(size_t index) const { return Def::OutputType(index); }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t index) const {
    return Characteristic(Def::OutputOptional(index));
  }

 private:
  static OrtCustomOpInputOutputCharacteristic Characteristic(bool optional) {
    return optional ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL
                    : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  }
};

}  // namespace ascend_moe
