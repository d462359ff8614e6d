// Template part of op_utils.h.
#pragma once

#include <algorithm>
#include <exception>
#include <mutex>

namespace ascend_moe {

namespace detail {
template <typename Fn>
struct RangeJob {
  Fn* fn;
  int64_t n;
  int64_t chunk;
  std::mutex mu;
  std::exception_ptr error;

  static void Run(void* self_ptr, size_t index) {
    auto* self = static_cast<RangeJob*>(self_ptr);
    const int64_t begin = static_cast<int64_t>(index) * self->chunk;
    const int64_t end = std::min(self->n, begin + self->chunk);
    try {
      (*self->fn)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(self->mu);
      if (!self->error) self->error = std::current_exception();
    }
  }
};
}  // namespace detail

template <typename Fn>
void ParallelForRange(Ort::KernelContext& ctx, int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1) {
    fn(int64_t{0}, n);
    return;
  }
  using F = std::remove_reference_t<Fn>;
  detail::RangeJob<F> job{&fn, n, grain, {}, nullptr};
  ctx.ParallelFor(&detail::RangeJob<F>::Run, static_cast<size_t>(chunks), 0, &job);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace ascend_moe
