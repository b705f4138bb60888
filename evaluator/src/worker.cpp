// The worker side of the JSON Lines protocol (worker.hpp).
#include <evodispatch/evaluator/worker.hpp>

#include <csignal>
#include <istream>
#include <ostream>

#include <evodispatch/evaluator/gpu_runner.hpp>
#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch {

namespace {

using nlohmann::json;

const json& required(JsonReader& r, const std::string& field, const char* what) {
  const json* v = r.member(field);
  if (!v) throw InputError(r.path_of(field) + ": missing (" + what + " is required)");
  return *v;
}

std::vector<int> seqlens_from_json(const json& j, const std::string& path) {
  if (!j.is_array()) throw InputError(path + ": expected an array of integers, got " + json_kind(j));
  std::vector<int> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto v = json_integer(j[i], path + "[" + std::to_string(i) + "]");
    if (v < 0 || v > (1 << 24)) throw InputError(path + "[" + std::to_string(i) + "]: must be in [0, 2^24]");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// The GPU runner, when per-request lengths are asked for; they mean nothing elsewhere.
CudaEvaluator& cuda_for_seqlens(Evaluator& ev) {
  auto* cuda = dynamic_cast<CudaEvaluator*>(&ev);
  if (!cuda) throw InputError("$.seqlens: per-request lengths need a cuda: device, this worker measures " + ev.spec());
  return *cuda;
}

json serve(Evaluator& ev, JsonReader& r, const std::string& op) {
  if (op == "info") {
    r.finish();
    return {{"ok", true},
            {"info",
             {{"spec", ev.spec()},
              {"device", to_json(ev.device())},
              {"fingerprint", ev.fingerprint()},
              {"kernel_build", ev.kernel_build()},
              {"measuring_protocol", ev.measuring_protocol()}}}};
  }
  if (op != "measure" && op != "compare")
    throw InputError("$.op: unknown operation \"" + op + "\" (info, measure, compare)");
  const Shape shape = shape_from_json(required(r, "shape", "a shape"), "$.shape");
  TimingOptions timing;
  if (const json* t = r.member("timing")) timing = timing_from_json(*t, "$.timing");
  std::vector<int> seqlens;
  if (const json* s = r.member("seqlens")) seqlens = seqlens_from_json(*s, "$.seqlens");
  if (op == "measure") {
    const Decision d = decision_from_json(required(r, "decision", "a decision"), "$.decision");
    r.finish();
    const Measurement m = seqlens.empty() ? ev.measure(shape, d, timing)
                                          : cuda_for_seqlens(ev).measure(MeasureCase{shape, seqlens}, d, timing);
    return {{"ok", true}, {"measurement", to_json(m)}};
  }
  const json& ds = required(r, "decisions", "an array of two decisions");
  if (!ds.is_array() || ds.size() != 2) throw InputError("$.decisions: expected an array of two decisions");
  const Decision a = decision_from_json(ds[0], "$.decisions[0]");
  const Decision b = decision_from_json(ds[1], "$.decisions[1]");
  int pairs = 30;
  if (const auto p = r.integer("pairs")) {
    if (*p < 1 || *p > 100000) throw InputError("$.pairs: must be in [1, 100000]");
    pairs = static_cast<int>(*p);
  }
  r.finish();
  const Comparison c = seqlens.empty() ? ev.compare(shape, a, b, timing, pairs)
                                       : cuda_for_seqlens(ev).compare(MeasureCase{shape, seqlens}, a, b, timing, pairs);
  return {{"ok", true}, {"comparison", to_json(c)}};
}

}  // namespace

json serve_request(Evaluator& ev, const std::string& line) {
  json reply;
  json id = nullptr;
  try {
    json req;
    try {
      req = json::parse(line);
    } catch (const json::parse_error& e) {
      throw InputError(std::string("not JSON: ") + e.what());
    }
    if (req.is_object() && req.contains("id")) id = req["id"];
    JsonReader r(req, "$");
    r.member("id");
    reply = serve(ev, r, r.required_string("op"));
  } catch (const InputError& e) {
    reply = {{"ok", false}, {"error", e.what()}};
  } catch (const std::exception& e) {
    reply = {{"ok", false}, {"error", std::string("worker: ") + e.what()}};
  }
  reply["id"] = id;
  if (const auto why = ev.unusable()) reply["unusable"] = *why;
  return reply;
}

int serve_worker(Evaluator& ev, std::istream& in, std::ostream& out, const WorkerOptions& opts) {
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (++n == opts.crash_on_request) std::raise(SIGKILL);
    const json reply = serve_request(ev, line);
    // Compiler logs may hold bytes that are not UTF-8; they must not stop the reply.
    out << reply.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
    if (ev.unusable()) return kWorkerExitUnusable;
  }
  return 0;
}

}  // namespace evodispatch
