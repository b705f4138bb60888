#include <evodispatch/results/shapes.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

std::int64_t Shapes::upsert(const Shape& s) { return detail::ensure_shape(detail::connection(*db_), s); }

std::optional<std::int64_t> Shapes::find(const Shape& s) const { return detail::find_shape(detail::connection(*db_), s); }

std::optional<Shape> Shapes::get(std::int64_t id) const {
  sql::Statement st(detail::connection(*db_),
                    "SELECT " + detail::shape_columns("s") + " FROM shapes s WHERE s.id = :id");
  st.bind(":id", id);
  if (st.step()) return detail::read_shape(st, 0);
  return std::nullopt;
}

}  // namespace evodispatch::results
