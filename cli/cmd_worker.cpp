// evodispatch worker: serves measurements on stdin/stdout for a parent process
// (evaluator/worker.hpp documents the protocol). Started by the parent, not by users.
#include <cstdlib>
#include <iostream>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/worker.hpp>

#include "app.hpp"

namespace evodispatch::cli {

void add_worker(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("worker", "serve measurements as JSON Lines on stdin/stdout (started by the "
                                            "evaluator, one per GPU)");
  auto device = std::make_shared<std::string>();
  verb->add_option("--device", *device, "cuda:N | sim:PROFILE (measured in this process)")->required();
  verb->callback([&action, device] {
    action = [device] {
      // The evaluator in this process: a worker never starts workers of its own.
      auto evaluator = make_local_evaluator(*device);
      WorkerOptions opts;
      if (const char* n = std::getenv("EVODISPATCH_WORKER_CRASH_ON"); n && *n) opts.crash_on_request = std::atoi(n);
      return serve_worker(*evaluator, std::cin, std::cout, opts);
    };
  });
}

}  // namespace evodispatch::cli
