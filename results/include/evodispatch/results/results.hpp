#pragma once
// Everything the results store offers, for callers that want it all.
#include <evodispatch/results/comparisons.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/results/devices.hpp>
#include <evodispatch/results/errors.hpp>
#include <evodispatch/results/measurements.hpp>
#include <evodispatch/results/programs.hpp>
#include <evodispatch/results/run_shapes.hpp>
#include <evodispatch/results/runs.hpp>
#include <evodispatch/results/shapes.hpp>
