// The host half of the GPU runner's launch (gpu_runner.hpp): which kernels run, and the
// plan that sizes every grid, block and shared memory of the launch. No CUDA call here,
// so a test without a GPU sees exactly what the runner launches.
#include <evodispatch/evaluator/gpu_runner.hpp>

#include "decode_buffers.hpp"

namespace evodispatch {

namespace {

// The specs' resources, with what the runtime reports of the loaded kernels: ptxas's
// registers and the occupancies (the GPU accepted these kernels, so the plan's model of
// shared memory and registers does not get to refuse them).
KernelResources loaded_resources(const Shape& shape, const RunnerKernels& kernels, const LoadedKernelReport& decode,
                                 const LoadedKernelReport& combine) {
  KernelResources r = kernel_resources(kernels.decode, kernels.combine.value_or(combine_spec_for(shape)));
  if (decode.resources.registers > 0) r.registers_per_thread = decode.resources.registers;
  r.ctas_per_sm = decode.ctas_per_sm;
  if (kernels.combine) r.combine_ctas_per_sm = combine.ctas_per_sm;
  return r;
}

// The row's record of what was launched: the plan's sizes and the kernels' reports.
nlohmann::json launched(const RunnerLaunch& l, const LoadedKernelReport& decode, const LoadedKernelReport& combine) {
  const Plan& p = l.plan;
  nlohmann::json g = {{"decode_kernel", l.kernels.decode.name()},
                      {"decode_grid", p.grid_ctas},
                      {"decode_block", p.threads_per_cta},
                      {"decode_smem_bytes", p.smem_bytes_per_cta},
                      {"decode_ctas_per_sm", decode.ctas_per_sm},
                      {"decode_registers", decode.resources.registers},
                      {"decode_spill_bytes", decode.resources.spill_store_bytes + decode.resources.spill_load_bytes},
                      {"work_items", p.work_items}};
  if (p.cluster_merge) g["decode_cluster_ctas"] = p.num_splits;
  if (p.combine) {
    g["combine_kernel"] = l.kernels.combine->name();
    g["combine_grid"] = p.combine_grid;
    g["combine_block"] = p.combine_threads_per_cta;
    g["combine_ctas"] = p.combine_ctas;
    g["combine_registers"] = combine.resources.registers;
  }
  return g;
}

}  // namespace

RunnerKernels runner_kernels(const Shape& shape, const Decision& decision, const DeviceInfo& dev) {
  return runner_kernels(shape, decision, spec_for(shape, resolve(decision, shape), dev));
}

RunnerKernels runner_kernels(const Shape& shape, const Decision& decision, const KernelSpec& decode) {
  RunnerKernels k{decode, std::nullopt};
  if (combine_runs(decision.num_splits, decode.cluster_merge)) k.combine = combine_spec_for(shape);
  return k;
}

std::string plan_launch(const MeasureCase& c, const Decision& decision, const DeviceInfo& dev,
                        const RunnerKernels& kernels, const LoadedKernelReport& decode,
                        const LoadedKernelReport& combine, RunnerLaunch& out, std::optional<bool> grid_by_items) {
  RunnerLaunch l;
  l.decision = resolve(decision, c.shape);
  l.kernels = kernels;
  try {
    l.plan = plan(c.shape, l.decision, dev, loaded_resources(c.shape, kernels, decode, combine));
    if (l.plan.combine != kernels.combine.has_value())
      throw InputError(std::string("the plan ") + (l.plan.combine ? "runs" : "skips") + " the combine kernel, the kernels " +
                       (kernels.combine ? "include" : "lack") + " one");
    l.base = decode_params_for(c.shape, l.decision, kernels.decode, gpu::case_layout(c.shape, 1).max_pages);
  } catch (const InputError& e) {
    return "no launch plan (" + kernels.decode.name() + ", " + describe(l.decision) + "): " + e.what();
  }
  if (grid_by_items) {
    if (*grid_by_items && l.decision.sm_margin > 0)
      return "a grid of every work item: an SM margin needs the persistent grid (it holds the CTAs to the usable SMs)";
    l.plan.grid_ctas = decode_grid_ctas(l.plan, *grid_by_items);
  }
  l.row_plan = to_json(l.plan);
  l.row_plan["gpu"] = launched(l, decode, combine);
  if (!c.seqlens.empty()) l.row_plan["seqlens"] = c.seqlens;
  out = std::move(l);
  return "";
}

}  // namespace evodispatch
