// LibTorch's fused Adam kernel (`at::_fused_adam_`, what `torch.optim.Adam(fused=True)` runs),
// which tch 0.22 does not bind. Compiled by build.rs against the headers of the LibTorch that
// torch-sys links (feature `tch`); called by adam.rs. The tensors are tch's handles (torch-sys's
// C API passes `at::Tensor *`).
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>

extern "C" {

// One Adam step of one parameter, in place on `param`, `exp_avg` and `exp_avg_sq`, with
// LibTorch's fused kernel (one launch on a GPU). `step` holds the step count the kernel's bias
// corrections use. Returns 0, or 1 with the exception's text in `err` (at most `err_len` bytes).
int trainer_fused_adam(at::Tensor *param, at::Tensor *grad, at::Tensor *exp_avg,
                       at::Tensor *exp_avg_sq, at::Tensor *step, double lr, double beta1,
                       double beta2, double eps, char *err, size_t err_len) {
  try {
    at::_fused_adam_({*param}, {*grad}, {*exp_avg}, {*exp_avg_sq}, {}, {*step}, lr, beta1,
                     beta2, /*weight_decay=*/0.0, eps, /*amsgrad=*/false,
                     /*maximize=*/false);
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(err, err_len, "%s", e.what());
    return 1;
  }
}
}
