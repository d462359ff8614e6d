#include "cann_host_stage.h"

#include "ops_src/cann/aclnn_args.h"

namespace ascend_moe {

namespace {

size_t ElementBytes(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
      return 8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
      return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
      return 2;
    default:
      return 1;  // int8, uint8, bool, the float8 types
  }
}

}  // namespace

InputView CannHostStage::Host(const InputView& view, bool in_host_memory) {
  if (!view.present || in_host_memory || view.size == 0) return view;
  const size_t bytes = static_cast<size_t>(view.size) * ElementBytes(view.type);
  inputs_.push_back(cann::Download(device_, view.data, bytes));
  InputView host = view;
  host.data = inputs_.back()->get();
  return host;
}

void* CannHostStage::Output(const char* op, const ParamSpec* specs, size_t index,
                            const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
  void* device = GetCheckedOutput(ctx_, op, specs, index, shape, type, /*required=*/true);
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * ElementBytes(type);
  outputs_.push_back(Mirror{device, bytes, std::make_unique<cann::HostBuffer>(bytes ? bytes : 1)});
  return outputs_.back().host->get();
}

void CannHostStage::Finish() {
  for (const Mirror& m : outputs_) {
    if (m.bytes) m.host->UploadTo(device_, m.device, m.bytes);  // the pool keeps it until the copy ran
  }
}

}  // namespace ascend_moe
