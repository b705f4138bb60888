#pragma once
// The latency model of a distilled function as C++ and as Python, exact twins of
// latency_model.cpp's integer arithmetic (private to the emitters).
#include <string>

#include <evodispatch/heuristics/latency_model.hpp>

namespace evodispatch::distill {

// Functions in namespace detail: model_dispatch(const Shape&, const DeviceInfo&, const
// Decision& baseline) over the header's own Shape, DeviceInfo and Decision.
std::string emit_model_cpp(const LatencyModel&);
// Module-level functions: _model_dispatch(shape, hw, baseline) over the module's dicts.
std::string emit_model_python(const LatencyModel&);

}  // namespace evodispatch::distill
