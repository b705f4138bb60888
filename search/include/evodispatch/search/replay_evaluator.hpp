#pragma once
// The replay evaluator (`--device replay:DB`): an Evaluator that answers from the
// measurements another results database holds, as Kernel Tuner's simulation runner replays
// stored ones behind the same interface. A search measured overnight on a GPU can be
// searched again here, with other seeds or settings, without the GPU: every (shape,
// decision) the GPU measured is answered with its stored row, any other is a failed row
// saying so, and a comparison divides two stored medians (no interleaving: `pairs` 0).
//
// It replays the device and kernel build with the most successful rows in the file (a GPU
// before a simulator). Its own fingerprint is "replay:" + that device's, so replayed rows
// stored in the search's database are never taken for measurements of the GPU itself.
#include <memory>
#include <string>
#include <string_view>

#include <evodispatch/evaluator/evaluator.hpp>

namespace evodispatch::search {

inline constexpr std::string_view kReplayPrefix = "replay:";

// InputError naming the file when it is missing, not a results database, or holds no
// successful measurement.
std::unique_ptr<Evaluator> make_replay_evaluator(const std::string& db_path);

// make_evaluator (evaluator.hpp), or make_replay_evaluator for "replay:DB".
std::unique_ptr<Evaluator> make_any_evaluator(std::string_view device_spec);

}  // namespace evodispatch::search
