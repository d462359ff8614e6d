// The ORT op definition shared by every ascend.moe op and execution provider.
//
// `Def` describes the op once (EP independent), from the tables generated from its ONNX schema
// (op_defs.gen.h):
//   static constexpr const char* kName; static constexpr int kSinceVersion;
//   static constexpr const ParamSpec* kInputs; kNumInputs; kOutputs; kNumOutputs;
//   static constexpr const AttrSpec* kAttrs; kNumAttrs;
//   static OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp*, OrtShapeInferContext*);
//   optional: static void CheckGraphInputs(const std::vector<GraphTensor>&);  // fails kernel
//                                         // creation for input ranks the graph must declare
//   optional: static std::vector<ONNXTensorElementDataType> OutputTypes(const OrtKernelInfo*,
//                 const std::vector<GraphTensor>& inputs);  // output types an attribute decides
//                                         // (one per output, UNDEFINED = from the inputs)
//   optional: static void CheckNode(const OrtKernelInfo*, const std::vector<GraphTensor>& inputs);
//                                         // rules across inputs and attributes the tables cannot
//                                         // state: fails kernel creation, after the kernel read its
//                                         // attributes (every execution provider's kernel)
// Input presence and element types are checked against kInputs at session creation (when the kernel is
// created; also at shape inference, which ORT only logs): the inputs are declared with an
// undefined type because each accepts several. Output types are checked there too: ORT types
// an output the shape inference left unset like the node's last input, which may be wrong.
// `Kernel` is one execution provider's kernel:
//   static constexpr const char* kProvider; explicit Kernel(const OrtKernelInfo*);
//   void Compute(Ort::KernelContext&);
//   optional: static OrtMemType InputMemoryType(size_t);  // e.g. inputs a device kernel reads
//                                                         // on the host (OrtMemTypeCPUInput)
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "op_defs.gen.h"
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

template <typename Def, typename = void>
struct HasCheckGraphInputs : std::false_type {};
template <typename Def>
struct HasCheckGraphInputs<
    Def, std::void_t<decltype(Def::CheckGraphInputs(std::declval<const std::vector<GraphTensor>&>()))>>
    : std::true_type {};

template <typename Def, typename = void>
struct HasOutputTypes : std::false_type {};
template <typename Def>
struct HasOutputTypes<
    Def, std::void_t<decltype(Def::OutputTypes(std::declval<const OrtKernelInfo*>(),
                                               std::declval<const std::vector<GraphTensor>&>()))>>
    : std::true_type {};

template <typename Def, typename = void>
struct HasCheckNode : std::false_type {};
template <typename Def>
struct HasCheckNode<Def,
                    std::void_t<decltype(Def::CheckNode(std::declval<const OrtKernelInfo*>(),
                                                        std::declval<const std::vector<GraphTensor>&>()))>>
    : std::true_type {};

template <typename Def, typename Kernel>
struct AscendMoeOp
    : Ort::CustomOpBase<AscendMoeOp<Def, Kernel>, StatusKernel<Def, Kernel>, /*WithStatus=*/true> {
  AscendMoeOp() {
    OrtCustomOp::InferOutputShapeFn = &CheckTypesAndInferShapes;
    RegisterManifestEntry(
        {Def::kName,
         Kernel::kProvider,
         Def::kSinceVersion,
         {Def::kAttrs, Def::kNumAttrs, Def::kInputs, Def::kNumInputs, Def::kOutputs, Def::kNumOutputs}});
  }

  OrtStatusPtr CreateKernelV2(const OrtApi& /*api*/, const OrtKernelInfo* info, void** kernel) const {
    *kernel = nullptr;
    return ToStatus(Def::kName, [&] {
      // ORT only logs a failed shape inference (unless strict), so the types are checked here,
      // where a failure does fail session creation.
      const std::vector<GraphTensor> inputs = KernelInputs(info, Def::kNumInputs);
      CheckKernelInputTypes(Def::kName, Def::kInputs, Def::kNumInputs, inputs);
      if constexpr (HasCheckGraphInputs<Def>::value) Def::CheckGraphInputs(inputs);
      std::vector<ONNXTensorElementDataType> overrides;
      if constexpr (HasOutputTypes<Def>::value) overrides = Def::OutputTypes(info, inputs);
      CheckKernelOutputTypes(info, Def::kName, Def::kInputs, Def::kNumInputs, inputs, Def::kOutputs,
                             Def::kNumOutputs, overrides.empty() ? nullptr : overrides.data());
      auto created = std::make_unique<StatusKernel<Def, Kernel>>(info);
      if constexpr (HasCheckNode<Def>::value) Def::CheckNode(info, inputs);
      *kernel = created.release();
    });
  }

  const char* GetName() const { return Def::kName; }
  const char* GetExecutionProviderType() const { return Kernel::kProvider; }

  size_t GetInputTypeCount() const { return Def::kNumInputs; }
  ONNXTensorElementDataType GetInputType(size_t /*index*/) const {
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;  // several types allowed: checked at run time
  }
  // Every input is declared optional to ORT: ORT's own check of a required input (left out, or
  // named "") reports it by position only, before any kernel exists. The kernel, which gets the
  // node's input count and the types of the present inputs, checks presence against kInputs at
  // creation (CheckKernelInputTypes) and names the input.
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t /*index*/) const {
    return Characteristic(/*optional=*/true);
  }
  OrtMemType GetInputMemoryType(size_t index) const {
    if constexpr (HasInputMemoryType<Kernel>::value) return Kernel::InputMemoryType(index);
    return OrtMemTypeDefault;
  }

  size_t GetOutputTypeCount() const { return Def::kNumOutputs; }
  // A fixed type when the schema allows one, else decided by shape inference / at run time.
  ONNXTensorElementDataType GetOutputType(size_t index) const {
    const ParamSpec& out = Def::kOutputs[index];
    return out.num_types == 1 ? out.types[0] : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t index) const {
    return Characteristic(Def::kOutputs[index].optional);
  }

 private:
  static OrtStatusPtr ORT_API_CALL CheckTypesAndInferShapes(const OrtCustomOp* op,
                                                            OrtShapeInferContext* ctx) {
    const OrtApi& api = Ort::GetApi();
    // The outputs are declared even when an input type is refused: ORT would type them like the
    // node's last input and report its own type clash instead of the library's message.
    OrtStatusPtr types = InferCheckInputTypes(api, ctx, Def::kName, Def::kInputs, Def::kNumInputs);
    OrtStatusPtr shapes = Def::InferShapes(op, ctx);
    if (types == nullptr) return shapes;
    if (shapes != nullptr) api.ReleaseStatus(shapes);
    return types;
  }

  static OrtCustomOpInputOutputCharacteristic Characteristic(bool optional) {
    return optional ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL
                    : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  }
};

// The CPU kernel of an op: the attributes read and checked once, when the session creates the
// kernel (a bad attribute fails session creation); per call, every input checked against the
// op's table (Def::GetInputs) and handed to `Run(ctx, inputs, attrs)`, the op's own work.
template <typename Def,
          void (*Run)(Ort::KernelContext&, const typename Def::Inputs&, const typename Def::Attrs&)>
struct CpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit CpuKernel(const OrtKernelInfo* info) : attrs_(Def::ReadAttrs(info)) {}

  void Compute(Ort::KernelContext& ctx) { Run(ctx, Def::GetInputs(ctx), attrs_); }

 private:
  typename Def::Attrs attrs_;
};

// The op registration of one execution provider's kernel: one static instance per (Def, Kernel).
template <typename Def, typename Kernel>
const OrtCustomOp* KernelOp() {
  static const AscendMoeOp<Def, Kernel> op;
  return &op;
}

// An op's kernels for ORT, in the order given (the CPU kernel first): what <Op>Ops() returns.
// Kernels registered in a file of their own (the CANN kernel: its `<Op>CannOp()`, cann_kernel.h)
// follow as arguments.
template <typename Def, typename... Kernels, typename... Registered>
std::vector<const OrtCustomOp*> OpKernels(Registered... registered) {
  static_assert((std::is_same_v<Registered, const OrtCustomOp*> && ...),
                "OpKernels: the arguments are registered ops (const OrtCustomOp*)");
  return {KernelOp<Def, Kernels>()..., registered...};
}

}  // namespace ascend_moe
