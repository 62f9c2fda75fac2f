#include "program/program.hpp"
#include "program/streamed_layers.hpp"

#include <algorithm>

#include "lowering/autodiff.hpp"
#include "lowering/lora_base.hpp"
#include "lowering/optimizer.hpp"
#include "lowering/zero_gathers.hpp"
#include "lowering/zero_overlap.hpp"
#include "ops/op_table.hpp"
#include "util/logger.hpp"

namespace tandem::host::program {

Program::Program(const model::ModelSpec& spec, const DeviceHandle& device, const PluginRegistry& registry,
                 ProgramOptions options)
    : spec_(spec),
      device_(device),
      registry_(registry),
      options_(std::move(options)),
      devices_(registry, device, options_.open_devices, options_.memory_budgets) {}

Program::~Program() = default;

Result<std::unique_ptr<Program>> Program::build(const model::ModelSpec& spec, const DeviceHandle& device,
                                                const PluginRegistry& registry, ProgramOptions options) {
  std::unique_ptr<Program> p(new Program(spec, device, registry, std::move(options)));
  if (auto r = p->apply_features(); !r) return r.error();
  if (auto r = p->lower(); !r) return r.error();
  p->unplaced_ = p->model_.graph;
  p->stream_as_asked();
  if (auto r = p->place(); !r) return r.error();
  // Passes and copies may have inserted nodes anywhere: find the optimizer phase again.
  p->locate_optimizer_phase();
  // The gradients a data-parallel run all-reduces are known now: they stay.
  if (p->layout_.data > 1) p->stream_as_asked();
  if (auto r = p->stream_to_fit(); !r) return r.error();
  return p;
}

// The feature plugins of the model file (training only), and the batch they
// make the graph for: [train] batch_size, or a feature's micro-batch.
Result<void> Program::apply_features() {
  const bool train = options_.mode == lowering::Mode::Train;
  micro_batch_samples_ = train || options_.batch == 0 ? spec_.train.batch_size : options_.batch;
  if (!train) {
    features_ = FeatureSet::none();
    return {};
  }
  auto minor = backend_abi_minor();
  if (!minor) return minor.error();
  auto features = FeatureSet::create(registry_, spec_, *minor);
  if (!features) return features.error();
  features_ = std::move(*features);
  auto micro_size = features_->micro_batch_size();
  if (!micro_size) return micro_size.error();
  if (*micro_size == 0) return {};
  if (spec_.train.batch_size % *micro_size != 0)
    return make_error(
        spec_.path + ": micro-batches of " + std::to_string(*micro_size) +
            " samples do not divide [train] batch_size = " + std::to_string(spec_.train.batch_size) +
            "; choose a micro-batch size that divides it",
        TDM_INVALID_ARGUMENT);
  micro_batch_samples_ = *micro_size;
  split_batches_ = true;
  return {};
}

// The lowest negotiated ABI minor among the backends of the devices the
// run may place layers on (its own, those named by --device and budgets,
// the model file's pins): lowering emits no catalog attribute newer than it.
Result<uint32_t> Program::backend_abi_minor() {
  auto ids = candidate_devices();
  if (!ids) return ids.error();
  for (const model::LayerSpec& layer : spec_.layers)
    if (layer.device) (void)devices_.open(*layer.device);  // a bad pin is reported by placement
  return devices_.lowest_abi_minor();
}

// Forward (the feature passes at their stages), autodiff, optimizer.
Result<void> Program::lower() {
  auto layout = parallel_layout(spec_, options_.group);
  if (!layout) return layout.error();
  layout_ = *layout;
  const lowering::TensorParallel tp = layout_.tensor_parallel();
  const bool train = options_.mode == lowering::Mode::Train;
  auto minor = backend_abi_minor();
  if (!minor) return minor.error();
  if (auto r = lowering::check_backend_for(spec_, device_.backend().name, *minor, tp.size > 1); !r) return r;
  // ZeRO over the data-parallel ranks; stage 3 shards the parameters of
  // every graph of the run (its evaluation's too).
  const int zero = layout_.data > 1 ? static_cast<int>(spec_.train.zero) : 0;
  lowering::ZeroSharding sharding{zero, layout_.data, {}, {}, {}};
  auto model = lowering::build_forward(spec_, micro_batch_samples_, options_.mode, TDM_F32, tp, options_.int8,
                                       *minor, sharding);
  if (!model) return model.error();
  model_ = std::move(*model);
  if (!train) return {};
  Graph& graph = model_.graph;
  if (auto r = features_->run_passes(TDM_PASS_BEFORE_AUTODIFF, graph); !r) return r;
  if (auto r = lowering::append_backward(model_); !r) return r;
  if (auto r = lowering::gather_again_for_backward(model_); !r) return r;
  if (auto r = lowering::widen_again_for_backward(model_); !r) return r;
  if (auto r = features_->run_passes(TDM_PASS_AFTER_AUTODIFF, graph); !r) return r;
  if (auto r = lowering::append_optimizer(model_, spec_.train); !r) return r;
  if (model_.zero.active() && spec_.train.zero_overlap)
    if (auto r = lowering::overlap_zero_exchanges(model_); !r) return r;
  if (auto r = features_->run_passes(TDM_PASS_AFTER_OPTIMIZER, graph); !r) return r;
  // Training reads the loss and the logits back every step: a pass that
  // removed either broke the graph (a plugin bug, not a user's mistake).
  if (graph.value(model_.logits) == nullptr || graph.value(model_.loss) == nullptr)
    return make_error(
        "a feature plugin's graph pass removed the model's logits or loss, which training reads "
        "back: run without the features one at a time to find it, and report it to its authors",
        TDM_INTERNAL);
  auto micro = features_->micro_batches();
  if (!micro) return micro.error();
  micro_batches_ = *micro;
  const int64_t asked = spec_.train.pipeline_microbatches;
  if (asked > 0 && asked != int64_t(micro_batches_))
    return make_error(spec_.path + ": [train] pipeline_microbatches = " + std::to_string(asked) +
                          " but [features.grad_accum] makes " + std::to_string(micro_batches_) +
                          " micro-batches per step; give one of the two",
                      TDM_INVALID_ARGUMENT);
  if (split_batches_ && micro_batch_samples_ * micro_batches_ != spec_.train.batch_size)
    return make_error("a feature splits each batch of " + std::to_string(spec_.train.batch_size) +
                          " into micro-batches of " + std::to_string(micro_batch_samples_) +
                          " but asks for " + std::to_string(micro_batches_) +
                          " of them per step (internal: the plugin is inconsistent)",
                      TDM_INTERNAL);
  return {};
}

void Program::locate_optimizer_phase() {
  const Graph& g = model_.graph;
  run_on_skip_.clear();
  synced_gradients_.clear();
  model_.optimizer_begin = g.node_count();
  clip_point_ = g.node_count();
  for (size_t i = g.node_count(); i-- > 0;) {
    const Node& n = *g.node_at(i);
    if (n.phase == TDM_PHASE_OPTIMIZER) model_.optimizer_begin = i;
    if (n.phase == TDM_PHASE_OPTIMIZER && n.annotations.count("tandem.run_on_skip") > 0)
      run_on_skip_.insert(run_on_skip_.begin(), i);
    if (model_.clip_coef != kNoValue &&
        std::find(n.inputs.begin(), n.inputs.end(), model_.clip_coef) != n.inputs.end())
      clip_point_ = i;
  }
  // The host reads the norm as soon as it is computed: a later node (ZeRO's
  // shards, for one) may reuse its bytes.
  if (model_.grad_norm_sq != kNoValue)
    if (auto at = g.position(g.value(model_.grad_norm_sq)->producer))
      clip_point_ = std::min(clip_point_, *at + 1);
  // The gradient each update reads, before clipping scales it: after a pass
  // such as grad_accum this is the accumulated sum, not the autodiff value.
  for (size_t i = model_.optimizer_begin; i < g.node_count(); ++i) {
    const Node& n = *g.node_at(i);
    const ops::OpInfo* info = ops::find(n.op);
    if (info == nullptr || !info->is(ops::kOptimizer)) continue;
    ValueId grad = n.inputs[size_t(info->gradient_input)];
    const Node* producer = g.node(g.value(grad)->producer);
    // An update on another device ([train] optimizer_device) reads a copy:
    // ranks average the gradient where it was computed, before the copy.
    const auto before_copy = [&] {
      if (producer != nullptr && producer->op == ops::kDeviceCopy) {
        grad = producer->inputs[0];
        producer = g.node(g.value(grad)->producer);
      }
    };
    before_copy();
    // The coefficient, or its copy on the device (or pipeline stage) of the update.
    const auto is_clip_coef = [&](ValueId v) {
      const Node* copy = g.node(g.value(v)->producer);
      return v == model_.clip_coef ||
             (copy != nullptr && copy->op == ops::kDeviceCopy && copy->inputs[0] == model_.clip_coef);
    };
    if (producer != nullptr && model_.clip_coef != kNoValue && producer->inputs.size() == 2 &&
        is_clip_coef(producer->inputs[1])) {
      grad = producer->inputs[0];
      producer = g.node(g.value(grad)->producer);
      before_copy();
    }
    // ZeRO: stage 1 shards the gradient the host averaged; stage 2's graph
    // averages every gradient itself (zero.reduce_scatter), before a pass
    // such as grad_accum accumulates the shards.
    if (model_.zero.active() && model_.zero.stage >= 2) continue;
    if (producer != nullptr && ops::host_kind(producer->op) == ops::HostKind::ZeroShard)
      grad = producer->inputs[0];
    synced_gradients_.push_back(grad);
  }
}

Result<void> Program::allocate(exec::ExecutorOptions options) {
  // A training run's peaks count from here: calibration and planning
  // allocated before. (An evaluation's executors add to its run's peaks.)
  if (options_.mode == lowering::Mode::Train)
    for (const auto& [id, handle] : devices_.by_id()) handle->allocator().reset_peak();
  auto executor = make_executor(options);
  // A device that holds less than the plan assumed: place again within what it held.
  for (int attempt = 0; !executor && executor.error().status == TDM_OUT_OF_MEMORY && attempt < 3; ++attempt) {
    if (auto r = replan_after_oom(executor.error()); !r) return r.error();
    executor = make_executor(options);
  }
  if (!executor) return executor.error();
  executor_ = std::move(*executor);
  // A pipeline writes each micro-batch into the instance that runs it.
  if (!options_.prefetch || options_.mode != lowering::Mode::Train || micro_batch_pipeline() != nullptr)
    return {};
  // Second device buffers for the next batch, counted in the plan (estimate_inputs).
  for (ValueId v : {model_.input, model_.labels}) {
    auto r = executor_->allow_staging(v);
    if (!r && r.error().status != TDM_OUT_OF_MEMORY) return r.error();
    if (!r) {  // a device that ran out re-planned without room to spare: copy each batch in its step
      log_warning("no room for the next batch beside this one (" + r.error().message +
                  "): each batch is copied when its step starts (as with --no-prefetch)");
      options_.prefetch = false;
      break;
    }
  }
  return {};
}

}  // namespace tandem::host::program
