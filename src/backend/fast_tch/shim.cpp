// The LibTorch kernels tch 0.22 does not bind: the fused Adam (`at::_fused_adam_`, what
// `torch.optim.Adam(fused=True)` runs; called by adam.rs), the convolution's weight gradient
// alone (`at::convolution_backward`; called by grads.rs) and cross-entropy's forward and backward
// kernels (`nll_loss_forward`/`nll_loss_backward`, which carry a total weight; called by
// xent.rs). Compiled by build.rs against the
// headers of the LibTorch that torch-sys links (feature `tch`). The tensors are tch's handles
// (torch-sys's C API passes `at::Tensor *`); a result is returned as a new handle the caller owns.
//
// With TRAINER_SHIM_CUDA (build.rs defines it when the LibTorch has CUDA and CUDA's runtime
// headers are found), also CUDA graphs (`at::cuda::CUDAGraph`, what `torch.cuda.graph` runs) on a
// side stream, for `--cuda-graph` (graph.rs); without it those functions report that this
// LibTorch has no CUDA.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>

#ifdef TRAINER_SHIM_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

// Runs `f`, catching LibTorch's C++ exceptions (they must not cross into Rust): 0, or 1 with
// the exception's text in `err` (at most `err_len` bytes, NUL-terminated).
template <class F> static int guarded(char *err, size_t err_len, F f) {
  try {
    f();
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(err, err_len, "%s", e.what());
    return 1;
  }
}

extern "C" {

// One Adam step of one parameter, in place on `param`, `exp_avg` and `exp_avg_sq`, with
// LibTorch's fused kernel (one launch on a GPU). `step` holds the step count the kernel's bias
// corrections use. Returns 0, or 1 with the exception's text in `err` (at most `err_len` bytes).
int trainer_fused_adam(at::Tensor *param, at::Tensor *grad, at::Tensor *exp_avg,
                       at::Tensor *exp_avg_sq, at::Tensor *step, double lr, double beta1,
                       double beta2, double eps, char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    at::_fused_adam_({*param}, {*grad}, {*exp_avg}, {*exp_avg_sq}, {}, {*step}, lr, beta1,
                     beta2, /*weight_decay=*/0.0, eps, /*amsgrad=*/false,
                     /*maximize=*/false);
  });
}

// `trainer_fused_adam` as a CUDA graph can replay it: the step count and the learning rate are
// read from device tensors (`step`, `lr`: one value each, f32), which the caller fills before
// each replay, instead of scalars fixed in the launch; the kernel's own bias corrections apply
// (`torch.optim.Adam(fused=True, capturable=True)`). Returns 0, or 1 with the text in `err`.
int trainer_fused_adam_graph(at::Tensor *param, at::Tensor *grad, at::Tensor *exp_avg,
                             at::Tensor *exp_avg_sq, at::Tensor *step, at::Tensor *lr,
                             double beta1, double beta2, double eps, char *err,
                             size_t err_len) {
  return guarded(err, err_len, [&] {
    at::_fused_adam_({*param}, {*grad}, {*exp_avg}, {*exp_avg_sq}, {}, {*step}, *lr, beta1,
                     beta2, /*weight_decay=*/0.0, eps, /*amsgrad=*/false,
                     /*maximize=*/false);
  });
}

// The gradient of `conv2d(x, weight)` (no transposition) with respect to `weight` for the output
// gradient `dy`, and nothing else (`output_mask` {false, true, false}): on an NVIDIA GPU cuDNN's
// weight-gradient kernel, as PyTorch's backward runs it. Writes a new tensor handle to `*out`.
// Returns 0, or 1 with the exception's text in `err`.
int trainer_conv2d_weight_backward(at::Tensor *dy, at::Tensor *x, at::Tensor *weight,
                                   const int64_t *stride, const int64_t *padding,
                                   const int64_t *dilation, int64_t groups, at::Tensor **out,
                                   char *err, size_t err_len) {
  return guarded(err, err_len, [&] {
    auto grads = at::convolution_backward(
        *dy, *x, *weight, /*bias_sizes=*/::std::nullopt, at::IntArrayRef(stride, 2),
        at::IntArrayRef(padding, 2), at::IntArrayRef(dilation, 2), /*transposed=*/false,
        /*output_padding=*/at::IntArrayRef({0, 0}), groups, {false, true, false});
    *out = new at::Tensor(std::get<1>(grads));
  });
}

// PyTorch's `F.cross_entropy(logits, target)` (mean over the rows) as its two forward kernels:
// `_log_softmax` over dim 1 and `nll_loss_forward`. Writes the loss (shape [1]), the log-softmax
// and the total weight (both kept for the backward) as new handles. Returns 0, or 1 with the
// exception's text in `err`.
int trainer_cross_entropy(at::Tensor *logits, at::Tensor *target, at::Tensor **loss,
                          at::Tensor **log_softmax, at::Tensor **total_weight, char *err,
                          size_t err_len) {
  return guarded(err, err_len, [&] {
    auto out = at::_log_softmax(*logits, 1, false);
    auto r = at::nll_loss_forward(out, *target, ::std::nullopt, at::Reduction::Mean, -100);
    *loss = new at::Tensor(std::get<0>(r).reshape({1}));
    *log_softmax = new at::Tensor(out);
    *total_weight = new at::Tensor(std::get<1>(r));
  });
}

// The gradient of `trainer_cross_entropy`'s loss with respect to the logits for the loss's
// gradient `grad` (shape [1]), as PyTorch's autograd computes it: `nll_loss_backward`, then
// `_log_softmax_backward_data`. Writes a new handle to `*out`. Returns 0, or 1 with the
// exception's text in `err`.
int trainer_cross_entropy_backward(at::Tensor *grad, at::Tensor *log_softmax, at::Tensor *target,
                                   at::Tensor *total_weight, at::Tensor **out, char *err,
                                   size_t err_len) {
  return guarded(err, err_len, [&] {
    auto g = at::nll_loss_backward(grad->reshape({}), *log_softmax, *target, ::std::nullopt,
                                   at::Reduction::Mean, -100, *total_weight);
    *out = new at::Tensor(
        at::_log_softmax_backward_data(g, *log_softmax, 1, log_softmax->scalar_type()));
  });
}

// ---- CUDA graphs (`--cuda-graph`) ----
// One side stream per process (the first device asked), kept for the process's life: the
// eager warm-up steps and the capture run on it, so that what LibTorch creates lazily per stream
// (cuBLAS's workspace) exists before the capture, as `torch.cuda.graph` asks.

// 1 when this shim can capture CUDA graphs, else 0.
int trainer_cuda_graphs() {
#ifdef TRAINER_SHIM_CUDA
  return 1;
#else
  return 0;
#endif
}

#ifdef TRAINER_SHIM_CUDA
static std::optional<c10::cuda::CUDAStream> side_stream;
static std::optional<c10::cuda::CUDAStream> outer_stream;

static void enter_side(int64_t device) {
  if (outer_stream) {
    throw std::runtime_error("the side stream is already entered");
  }
  auto current = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  if (!side_stream || side_stream->device_index() != current.device_index()) {
    side_stream = c10::cuda::getStreamFromPool(false, current.device_index());
  }
  // The side stream starts after the work queued so far (a wait: the side stream is entered
  // for the few warm-up steps and the capture only).
  c10::cuda::device_synchronize();
  outer_stream = current;
  c10::cuda::setCurrentCUDAStream(*side_stream);
}

static void leave_side() {
  if (!outer_stream) {
    return;
  }
  // What follows on the outer stream comes after the side stream's work.
  c10::cuda::device_synchronize();
  c10::cuda::setCurrentCUDAStream(*outer_stream);
  outer_stream.reset();
}
#endif

static int no_cuda(char *err, size_t err_len) {
  std::snprintf(err, err_len, "this binary's LibTorch was built without CUDA (or build.rs found "
                              "no CUDA runtime headers): no CUDA graphs");
  return 1;
}

// Makes the side stream (on CUDA device `device`) current; `on` = 0 makes the stream that was
// current before current again, after the side stream's work. Returns 0, or 1 with the text.
int trainer_side_stream(int64_t device, int on, char *err, size_t err_len) {
#ifdef TRAINER_SHIM_CUDA
  return guarded(err, err_len, [&] {
    if (on) {
      enter_side(device);
    } else {
      leave_side();
    }
  });
#else
  (void)device;
  (void)on;
  return no_cuda(err, err_len);
#endif
}

// Starts capturing on the side stream of CUDA device `device` into a new graph, written to
// `*graph` (freed by trainer_graph_free). Every LibTorch kernel this thread queues until
// trainer_graph_capture_end is recorded, not run. Returns 0, or 1 with the text.
int trainer_graph_capture_begin(int64_t device, void **graph, char *err, size_t err_len) {
#ifdef TRAINER_SHIM_CUDA
  return guarded(err, err_len, [&] {
    // As torch.cuda.graph: nothing of the eager work still running while the capture starts.
    c10::cuda::device_synchronize();
    enter_side(device);
    auto *g = new at::cuda::CUDAGraph();
    try {
      g->capture_begin();
    } catch (...) {
      delete g;
      leave_side();
      throw;
    }
    *graph = g;
  });
#else
  (void)device;
  (void)graph;
  return no_cuda(err, err_len);
#endif
}

// Ends the capture `graph` began (and leaves the side stream, also on failure). Returns 0, or 1
// with the text (then the graph cannot be replayed).
int trainer_graph_capture_end(void *graph, char *err, size_t err_len) {
#ifdef TRAINER_SHIM_CUDA
  return guarded(err, err_len, [&] {
    try {
      static_cast<at::cuda::CUDAGraph *>(graph)->capture_end();
    } catch (...) {
      leave_side();
      throw;
    }
    leave_side();
  });
#else
  (void)graph;
  return no_cuda(err, err_len);
#endif
}

// Replays `graph` on the current stream (its random-number offsets advanced from the
// generator's current seed, as LibTorch's replay does). Returns 0, or 1 with the text.
int trainer_graph_replay(void *graph, char *err, size_t err_len) {
#ifdef TRAINER_SHIM_CUDA
  return guarded(err, err_len, [&] {
    static_cast<at::cuda::CUDAGraph *>(graph)->replay();
  });
#else
  (void)graph;
  return no_cuda(err, err_len);
#endif
}

void trainer_graph_free(void *graph) {
#ifdef TRAINER_SHIM_CUDA
  delete static_cast<at::cuda::CUDAGraph *>(graph);
#else
  (void)graph;
#endif
}
}
